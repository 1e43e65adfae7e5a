import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PoolArenaMetric;
import io.netty.buffer.PoolChunkListMetric;
import io.netty.buffer.PoolChunkMetric;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.util.internal.PlatformDependent;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.IdentityHashMap;
import java.util.Map;

/**
 * NettyBookie is the BookKeeper incident on Netty's pooled direct memory
 * (ByteBufAllocator.DEFAULT, Debian's libnetty-java 4.1.48, its defaults:
 * 16 MiB chunks, thread caches for buffers up to 32 KiB): two code paths
 * share one pool.
 *
 * readEntry, the innocent path, takes a --large (64 KiB) buffer for every
 * request and releases it: too big for the thread cache, each one is a
 * run of pages from a chunk, so it is the path that finds the arena full
 * and makes it allocate a new chunk.
 *
 * addEntry, the leaking path, takes a --small (4 KiB) buffer for every
 * request and drops every --leak-every-th without release(): the dropped
 * buffers become unreachable, so Netty's leak detector reports them once
 * the GC has collected them (main calls System.gc() every --gc-every
 * batches and keeps allocating, which polls the detector's queue). Their
 * memory stays taken in the pool's chunks: the pool grows.
 *
 * With -Dio.netty.allocator.type=unpooled each buffer is an allocation of
 * its own (with -Dio.netty.tryReflectionSetAccessible=true --add-opens
 * java.base/java.nio=ALL-UNNAMED, an Unsafe.allocateMemory with no
 * Cleaner, so a dropped buffer's memory is never freed; where Netty cannot
 * use that path, as 4.1.48 on Temurin 25, each buffer has a Cleaner and
 * the GC frees a dropped buffer's memory).
 *
 * Ground truth is printed at the end: the buffers each path took, kept and
 * released, and the chunks the pool's direct arenas allocated while each
 * path was in the allocator (found by identity in the arenas' chunk lists
 * after every buffer allocation).
 */
public final class NettyBookie {
    static ByteBufAllocator alloc;
    static int small = 4096, large = 65536, leakEvery = 2;
    static long leaked, leakedBytes, released, readBytes;
    static long checksum;
    static final byte[] payload = new byte[large];

    /** Chunks seen in the direct arenas, by identity. */
    static final Map<PoolChunkMetric, Boolean> chunks = new IdentityHashMap<>();
    static long chunksByRead, chunksByAdd, chunksDestroyed;

    public static void main(String[] args) throws Exception {
        String waitFile = null;
        long holdMs = 0;
        int requests = 40960, batch = 512, batchMs = 20, gcEvery = 8;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                usage("missing value for " + a);
            }
            String v = args[++i];
            switch (a) {
                case "--requests": requests = Integer.parseInt(v); break;
                case "--batch": batch = Integer.parseInt(v); break;
                case "--batch-ms": batchMs = Integer.parseInt(v); break;
                case "--small": small = Integer.parseInt(v); break;
                case "--large": large = Integer.parseInt(v); break;
                case "--leak-every": leakEvery = Integer.parseInt(v); break;
                case "--gc-every": gcEvery = Integer.parseInt(v); break;
                case "--wait-file": waitFile = v; break;
                case "--hold": holdMs = Long.parseLong(v); break;
                default: usage("unknown option " + a);
            }
        }
        if (requests < 1 || batch < 1 || small < 1 || large < 1 || leakEvery < 1 || gcEvery < 1 || large > payload.length) {
            usage("--requests, --batch, --small, --large (at most 65536), --leak-every and --gc-every must be positive");
        }
        alloc = ByteBufAllocator.DEFAULT;
        boolean pooled = alloc instanceof PooledByteBufAllocator;
        if (waitFile != null) {
            System.err.printf("NettyBookie: %s allocator; waiting for %s%n", pooled ? "pooled" : "unpooled", waitFile);
            while (!Files.exists(Paths.get(waitFile))) {
                Thread.sleep(5);
            }
        }
        long t0 = System.nanoTime();
        int batches = 0;
        for (int done = 0; done < requests; done += batch) {
            int n = Math.min(batch, requests - done);
            for (int i = 0; i < n; i++) {
                readEntry(done + i);
                addEntry(done + i);
            }
            if (++batches % gcEvery == 0) {
                System.gc();
            }
            Thread.sleep(batchMs);
        }
        // Let the detector see the last collected buffers: a GC, then
        // allocations (each one polls its reference queue).
        System.gc();
        Thread.sleep(100);
        for (int i = 0; i < 64; i++) {
            readEntry(requests + i);
        }
        long workMs = (System.nanoTime() - t0) / 1000000;
        System.err.printf("NettyBookie: %s allocator; leaked %d buffers, %d bytes in addEntry (one in %d of %d requests); "
                + "released %d buffers of %d bytes in readEntry; arena allocated %d chunks in readEntry, %d in addEntry, destroyed %d; "
                + "%d chunks live; memory %s; netty direct memory %d; pid %d; work %d ms%n",
                pooled ? "pooled" : "unpooled", leaked, leakedBytes, leakEvery, requests, released, large,
                chunksByRead, chunksByAdd, chunksDestroyed, chunks.size(),
                PlatformDependent.useDirectBufferNoCleaner() ? "noCleaner (Unsafe.allocateMemory)" : "ByteBuffer.allocateDirect (Cleaner)",
                PlatformDependent.usedDirectMemory(),
                ProcessHandle.current().pid(), workMs);
        Thread.sleep(holdMs);
        if (checksum == 42) {
            System.err.println("unreachable");
        }
    }

    /**
     * readEntry serves a read: a large pooled direct buffer, filled and
     * released. It holds nothing after it returns.
     */
    static void readEntry(long entryId) {
        ByteBuf buf = alloc.directBuffer(large, large);
        chunksByRead += trackChunks();
        buf.writeLong(entryId);
        buf.writeBytes(payload, 0, large - 8);
        checksum += buf.getLong(large - 8);
        buf.release();
        released++;
        readBytes += large;
    }

    /**
     * addEntry serves an add: a small pooled direct buffer for the entry's
     * header; the duplicate-entry path (every leakEvery-th) returns without
     * release(), dropping the last reference.
     */
    static void addEntry(long entryId) {
        ByteBuf buf = alloc.directBuffer(small, small);
        chunksByAdd += trackChunks();
        buf.writeLong(entryId);
        buf.writeBytes(payload, 0, small - 8);
        checksum += buf.getLong(small - 8);
        if (entryId % leakEvery == leakEvery - 1) {
            leaked++; // duplicate entry: answered, never released
            leakedBytes += small;
            return;
        }
        buf.release();
    }

    /**
     * trackChunks updates the set of the direct arenas' chunks and returns
     * how many appeared since the last call; it counts those that
     * disappeared in chunksDestroyed. Unpooled: 0.
     */
    static long trackChunks() {
        if (!(alloc instanceof PooledByteBufAllocator)) {
            return 0;
        }
        Map<PoolChunkMetric, Boolean> now = new IdentityHashMap<>();
        for (PoolArenaMetric arena : ((PooledByteBufAllocator) alloc).metric().directArenas()) {
            for (PoolChunkListMetric list : arena.chunkLists()) {
                for (PoolChunkMetric c : list) {
                    now.put(c, Boolean.TRUE);
                }
            }
        }
        long added = 0;
        for (PoolChunkMetric c : now.keySet()) {
            if (!chunks.containsKey(c)) {
                added++;
            }
        }
        for (PoolChunkMetric c : chunks.keySet()) {
            if (!now.containsKey(c)) {
                chunksDestroyed++;
            }
        }
        chunks.clear();
        chunks.putAll(now);
        return added;
    }

    static void usage(String msg) {
        System.err.println("NettyBookie: " + msg);
        System.err.println("usage: NettyBookie [--requests N] [--batch R] [--batch-ms MS] [--small BYTES] [--large BYTES]"
                + " [--leak-every K] [--gc-every BATCHES] [--wait-file F] [--hold MS]");
        System.exit(2);
    }
}
