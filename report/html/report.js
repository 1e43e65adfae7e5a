// leakscope HTML report: draws the icicle graph from the embedded JSON and
// makes the leak table sortable and expandable. Names are only ever set as
// text (textContent, title), never parsed as markup.
(function () {
  "use strict";
  var body = document.body;
  body.classList.add("js");

  // formatBytes mirrors analyze.FormatBytes: "512 B", "1.5 KiB", "4.0 MiB".
  function formatBytes(n) {
    if (n < 1024) {
      return n + " B";
    }
    var units = "KMGTPE", v = n / 1024, i = 0;
    while (i < units.length - 1 && Math.round(v * 10) / 10 >= 1024) {
      v /= 1024;
      i++;
    }
    return v.toFixed(1) + " " + units.charAt(i) + "iB";
  }

  // hash maps a name to a stable number, so a function keeps its color.
  function hash(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    return h >>> 0;
  }

  function color(n) {
    var h = hash(n.n);
    switch (n.k) {
      case "root":
        return "hsl(210, 12%, 78%)";
      case "kind":
        return "hsl(" + (190 + h % 60) + ", 45%, 72%)";
      case "truncated":
        return "hsl(0, 0%, 86%)";
    }
    return "hsl(" + (8 + h % 42) + ", " + (72 + h % 20) + "%, " + (60 + (h >> 8) % 14) + "%)";
  }

  // The icicle graph.
  var flame = document.getElementById("flame");
  var info = document.getElementById("flame-info");
  var data = JSON.parse(document.getElementById("flame-data").textContent);
  var rowHeight = 18;
  var zoom = 0;

  function describe(n) {
    var share = data.total > 0 ? (100 * n.v / data.total).toFixed(1) : "0.0";
    return n.t + ": " + formatBytes(n.v) + " (" + share + "% of all live bytes) in " + n.c + " allocations";
  }

  function drawFlame() {
    flame.textContent = "";
    if (data.nodes.length === 0) {
      info.textContent = "Nothing is live: no icicle graph.";
      flame.dataset.rendered = "0";
      return;
    }
    var z = data.nodes[zoom];
    var width = flame.clientWidth || 1000;
    var depth = 0, drawn = 0;
    for (var i = 0; i < data.nodes.length; i++) {
      var n = data.nodes[i];
      if (n.x + n.v <= z.x || n.x >= z.x + z.v) {
        continue; // beside the zoomed box
      }
      // Boxes above the zoomed one are its ancestors: full width.
      var left = n.d < z.d ? 0 : (n.x - z.x) / z.v;
      var w = n.d < z.d ? 1 : n.v / z.v;
      if (w * width < 1) {
        continue; // narrower than a pixel
      }
      var el = document.createElement("div");
      el.className = "fn fn-" + n.k + (i === zoom && zoom !== 0 ? " zoomed" : "");
      el.style.left = (100 * left) + "%";
      el.style.width = (100 * w) + "%";
      el.style.top = (n.d * rowHeight) + "px";
      el.style.backgroundColor = color(n);
      el.textContent = n.n;
      el.title = describe(n);
      el.dataset.node = String(i);
      el.dataset.depth = String(n.d);
      flame.appendChild(el);
      depth = Math.max(depth, n.d);
      drawn++;
    }
    flame.style.height = ((depth + 1) * rowHeight) + "px";
    flame.dataset.rendered = String(drawn);
    flame.dataset.zoom = String(zoom);
    info.textContent = (zoom === 0 ? "" : "zoomed: ") + describe(z) +
      (data.hidden > 0 ? "; " + data.hidden + " boxes under 0.01% left out" : "");
  }

  flame.addEventListener("click", function (e) {
    var el = e.target.closest(".fn");
    if (!el) {
      return;
    }
    var i = Number(el.dataset.node);
    zoom = i === zoom ? 0 : i;
    drawFlame();
  });
  flame.addEventListener("mouseover", function (e) {
    var el = e.target.closest(".fn");
    if (el) {
      info.textContent = describe(data.nodes[Number(el.dataset.node)]);
    }
  });
  var resizing = 0;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(drawFlame, 100);
  });
  drawFlame();

  // The leak table: sort by a column, expand a row.
  var table = document.getElementById("leaks");
  if (table) {
    var heads = table.tHead.rows[0].cells;
    var key = function (tbody, col) {
      return tbody.rows[0].cells[col].dataset.sort;
    };
    var num = function (s) {
      return s === "" ? -Infinity : Number(s);
    };
    var sortBy = function (col) {
      var th = heads[col];
      var numeric = th.dataset.type === "num";
      var dir = th.getAttribute("aria-sort");
      // A new column sorts numbers biggest first and text A to Z.
      if (dir === null) {
        dir = numeric && col !== 0 ? "descending" : "ascending";
      } else {
        dir = dir === "ascending" ? "descending" : "ascending";
      }
      var sign = dir === "ascending" ? 1 : -1;
      var rows = Array.prototype.slice.call(table.tBodies);
      rows.sort(function (a, b) {
        var x = key(a, col), y = key(b, col);
        var c = numeric ? num(x) - num(y) : (x < y ? -1 : x > y ? 1 : 0);
        return sign * c || num(key(a, 0)) - num(key(b, 0));
      });
      rows.forEach(function (tb) {
        table.appendChild(tb);
      });
      for (var i = 0; i < heads.length; i++) {
        heads[i].removeAttribute("aria-sort");
      }
      th.setAttribute("aria-sort", dir);
      table.dataset.sorted = col + " " + dir;
    };
    Array.prototype.forEach.call(heads, function (th, col) {
      th.querySelector("button").addEventListener("click", function () {
        sortBy(col);
      });
    });
    var expand = function (tbody, open) {
      tbody.rows[1].classList.toggle("open", open);
      tbody.querySelector("button.toggle").setAttribute("aria-expanded", String(open));
    };
    table.addEventListener("click", function (e) {
      var b = e.target.closest("button.toggle");
      if (b) {
        var tb = b.closest("tbody");
        expand(tb, !tb.rows[1].classList.contains("open"));
      }
    });
    var all = function (open) {
      Array.prototype.forEach.call(table.tBodies, function (tb) {
        expand(tb, open);
      });
    };
    document.getElementById("expand-all").addEventListener("click", function () {
      all(true);
    });
    document.getElementById("collapse-all").addEventListener("click", function () {
      all(false);
    });
    // #leak-RANK opens that leak, so a CI log can link to it.
    var linked = /^#leak-\d+$/.test(location.hash) && document.getElementById(location.hash.slice(1));
    if (linked) {
      expand(linked, true);
      linked.scrollIntoView();
    }
    table.dataset.rows = String(table.tBodies.length);
  }

  body.dataset.ready = "true";
})();
