#!/bin/sh
# Regenerates vmlinux.h for arm64 on any host, from the BTF inside the
# pinned arm64 kernel Image that ../fetch-kernel.sh fetches (Debian 12's;
# bump the pin there and regenerate with make generate in the same
# commit). Needs what ../fetch-kernel.sh needs, and bpftool (root is not
# needed).
#
# An Image is not an ELF file: its BTF is found by the header every raw
# BTF blob starts with (magic 0xeb9f, version 1, flags 0, hdr_len 24), and
# its length is hdr_len + str_off + str_len from that header (the strings
# follow the types).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$here/vmlinux.h
image=$(sh "$here/../fetch-kernel.sh" arm64 --pinned)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

offs=$(LC_ALL=C grep -obUaP '\x9f\xeb\x01\x00\x18\x00\x00\x00' "$image" | cut -d: -f1)
[ "$(echo "$offs" | wc -w)" -eq 1 ] || { echo "update.sh: want one BTF header in $image, found: $offs" >&2; exit 1; }
# struct btf_header: magic, version, flags, hdr_len, then type_off,
# type_len, str_off, str_len (u32, little-endian), relative to its end.
set -- $(od -An -tu4 -j $((offs + 8)) -N 16 "$image")
len=$((24 + $3 + $4))
tail -c +$((offs + 1)) "$image" | head -c "$len" > "$tmp/btf"
bpftool btf dump file "$tmp/btf" format c > "$tmp/vmlinux.h"
grep -q '^struct user_pt_regs {' "$tmp/vmlinux.h" || { echo "update.sh: the BTF found is not arm64's kernel" >&2; exit 1; }
mv "$tmp/vmlinux.h" "$out"
