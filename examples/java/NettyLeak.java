import io.netty.buffer.ByteBuf;
import io.netty.buffer.PoolArenaMetric;
import io.netty.buffer.PoolChunkListMetric;
import io.netty.buffer.PoolChunkMetric;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.util.internal.PlatformDependent;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * NettyLeak is a BookKeeper-style request handler on Netty's pooled direct
 * memory (PooledByteBufAllocator, Debian's libnetty-java 4.1.48). Every
 * request takes one --size buffer from the pool in handleRequests.
 *
 * --mode leak: every --leak-every-th request (the "duplicate entry" path)
 * returns without releasing its buffer. The leaked buffers fill the pool's
 * 16 MiB chunks, so the arena allocates a new chunk every
 * chunk / (size × leak-every) requests, for as long as it runs: the
 * process's direct memory grows in 16 MiB steps, and the stack of each
 * step is handleRequests', whichever request happened to need the chunk.
 *
 * --mode pool (control): requests are kept in a window of --window
 * in-flight buffers and released when they leave it. The window fills the
 * pool once, right after the wait; then the same chunks are reused.
 *
 * One direct arena, no thread caches, one thread: chunk counts are
 * deterministic. Ground truth (examples/README.md) is printed at the end:
 * the chunks the arena allocated and destroyed after the wait, found by
 * identity in the arena's chunk lists (PoolArenaMetric.chunkLists) after
 * every request.
 */
public final class NettyLeak {
    static final int PAGE_SIZE = 8192, MAX_ORDER = 11; // chunk: 8192 << 11 = 16 MiB
    static final int WARMUP_REQUESTS = 8192; // per warm-up round

    static PooledByteBufAllocator alloc;
    static PoolArenaMetric arena;

    /** Leaked buffers (mode leak), reachable until exit, never released. */
    static final List<ByteBuf> leaked = new ArrayList<>();
    /** In-flight buffers (mode pool), released when they leave the window. */
    static final ArrayDeque<ByteBuf> window = new ArrayDeque<>();

    static String mode = "leak";
    static boolean leakMode;
    static int leakEvery = 4, windowSize = 960, size = 65536;

    /** Chunks seen in the arena, by identity; counted after the wait. */
    static final Map<PoolChunkMetric, Boolean> chunks = new IdentityHashMap<>();
    static boolean counting;
    static long chunksAllocated, chunksDestroyed;
    static long checksum;

    public static void main(String[] args) throws Exception {
        String waitFile = null;
        long holdMs = 0;
        int requests = 12288, batch = 64, batchMs = 50, warmup = 10;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                usage("missing value for " + a);
            }
            String v = args[++i];
            switch (a) {
                case "--mode": mode = v; break;
                case "--requests": requests = Integer.parseInt(v); break;
                case "--leak-every": leakEvery = Integer.parseInt(v); break;
                case "--window": windowSize = Integer.parseInt(v); break;
                case "--size": size = Integer.parseInt(v); break;
                case "--batch": batch = Integer.parseInt(v); break;
                case "--batch-ms": batchMs = Integer.parseInt(v); break;
                case "--warmup": warmup = Integer.parseInt(v); break;
                case "--wait-file": waitFile = v; break;
                case "--hold": holdMs = Long.parseLong(v); break;
                default: usage("unknown option " + a);
            }
        }
        if (!mode.equals("leak") && !mode.equals("pool")) {
            usage("unknown mode " + mode);
        }
        leakMode = mode.equals("leak");
        if (leakEvery < 1 || windowSize < 1 || size < 1 || batch < 1) {
            usage("--leak-every, --window, --size and --batch must be positive");
        }
        // preferDirect, 0 heap arenas, 1 direct arena, 8 KiB pages,
        // maxOrder 11 (16 MiB chunks), no tiny/small/normal thread caches.
        alloc = new PooledByteBufAllocator(true, 0, 1, PAGE_SIZE, MAX_ORDER, 0, 0, 0, true);
        arena = alloc.metric().directArenas().get(0);

        long t0 = System.nanoTime();
        // Warm-up: rounds of the same requests, in batches of 8 so that
        // handleRequests is compiled as a method (not only on stack), each
        // round ending with every buffer released, which destroys the
        // chunks that filled up: before the wait, the JIT sees
        // handleRequests take and return buffers, and the arena allocate
        // and destroy chunks.
        for (int r = 0; r < warmup; r++) {
            for (int done = 0; done < WARMUP_REQUESTS; done += 8) {
                handleRequests(done, 8);
            }
            drain();
        }
        trackChunks();
        System.err.printf("NettyLeak: warmed up in %d ms (%d rounds of %d requests); %d chunks in the arena; pool %s; waiting for %s%n",
                (System.nanoTime() - t0) / 1000000, warmup, WARMUP_REQUESTS, chunks.size(), allocationPath(), waitFile);
        if (waitFile != null) {
            while (!Files.exists(Paths.get(waitFile))) {
                Thread.sleep(5);
            }
        }

        counting = true;
        long t1 = System.nanoTime();
        for (int done = 0; done < requests; done += batch) {
            handleRequests(done, Math.min(batch, requests - done));
            Thread.sleep(batchMs);
        }
        long workMs = (System.nanoTime() - t1) / 1000000;
        int chunkSize = alloc.metric().chunkSize();
        if (leakMode) {
            System.err.printf("NettyLeak: leaked %d buffers of %d bytes in handleRequests (every %dth of %d requests); "
                    + "arena allocated %d chunks of %d bytes after the wait, destroyed %d; %d chunks live; "
                    + "netty direct memory %d; pid %d; work %d ms%n",
                    leaked.size(), size, leakEvery, requests, chunksAllocated, chunkSize, chunksDestroyed,
                    chunks.size(), PlatformDependent.usedDirectMemory(), ProcessHandle.current().pid(), workMs);
        } else {
            System.err.printf("NettyLeak: pooled %d in-flight buffers of %d bytes in handleRequests (%d requests); "
                    + "arena allocated %d chunks of %d bytes after the wait, destroyed %d; %d chunks live; "
                    + "netty direct memory %d; pid %d; work %d ms%n",
                    window.size(), size, requests, chunksAllocated, chunkSize, chunksDestroyed,
                    chunks.size(), PlatformDependent.usedDirectMemory(), ProcessHandle.current().pid(), workMs);
        }
        Thread.sleep(holdMs);
        if (checksum == 42) {
            System.err.println("unreachable");
        }
    }

    /**
     * Handles n add-entry requests (one channel read's worth), numbered
     * from first: each takes a pooled direct buffer, writes the entry into
     * it and "journals" it. Mode leak: the duplicate-entry path (every
     * leakEvery-th entry) forgets release(). Mode pool: the buffer stays in
     * flight until windowSize newer requests came, then is released.
     * main, which calls it, stays interpreted, so the JIT cannot inline
     * this method into a caller: it always has a frame of its own.
     */
    static void handleRequests(int first, int n) {
        for (int i = 0; i < n; i++) {
            int entryId = first + i;
            ByteBuf buf = alloc.directBuffer(size, size);
            buf.writeLong(entryId);
            while (buf.isWritable(8)) {
                buf.writeLong(entryId * 31L + buf.writerIndex());
            }
            checksum += buf.getLong(size - 8);
            if (leakMode) {
                if (entryId % leakEvery == leakEvery - 1) {
                    leaked.add(buf); // duplicate entry: answered, never released
                } else {
                    buf.release();
                }
            } else {
                window.addLast(buf);
                if (window.size() > windowSize) {
                    window.removeFirst().release();
                }
            }
            trackChunks();
        }
    }

    /** Releases every buffer the requests kept (warm-up only). */
    static void drain() {
        for (ByteBuf b : leaked) {
            b.release();
        }
        leaked.clear();
        while (!window.isEmpty()) {
            window.removeFirst().release();
        }
        trackChunks();
    }

    /**
     * Updates the set of the arena's chunks; after the wait, counts the
     * chunks that appeared (allocated) and disappeared (destroyed).
     */
    static void trackChunks() {
        Map<PoolChunkMetric, Boolean> now = new IdentityHashMap<>();
        for (PoolChunkListMetric list : arena.chunkLists()) {
            for (PoolChunkMetric c : list) {
                now.put(c, Boolean.TRUE);
            }
        }
        for (PoolChunkMetric c : now.keySet()) {
            if (!chunks.containsKey(c) && counting) {
                chunksAllocated++;
            }
        }
        for (PoolChunkMetric c : chunks.keySet()) {
            if (!now.containsKey(c) && counting) {
                chunksDestroyed++;
            }
        }
        chunks.clear();
        chunks.putAll(now);
    }

    /** Says how the pool gets its chunks' memory. */
    static String allocationPath() {
        return PlatformDependent.useDirectBufferNoCleaner()
                ? "noCleaner (Unsafe.allocateMemory)"
                : "ByteBuffer.allocateDirect";
    }

    static void usage(String msg) {
        System.err.println("NettyLeak: " + msg);
        System.err.println("usage: NettyLeak [--mode leak|pool] [--requests N] [--leak-every K] [--window W] [--size BYTES]"
                + " [--batch R] [--batch-ms MS] [--warmup ROUNDS] [--wait-file F] [--hold MS]");
        System.exit(2);
    }
}
