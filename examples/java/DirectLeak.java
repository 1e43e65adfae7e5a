import java.lang.reflect.Field;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * DirectLeak leaks native direct memory: blocks from
 * sun.misc.Unsafe.allocateMemory (the call ByteBuffer.allocateDirect makes
 * too) that nothing frees. The Java heap holds only their addresses.
 *
 * Ground truth (examples/README.md): after --wait-file, leakBuffers
 * allocates exactly --leaked blocks of --size bytes and keeps them;
 * releaseBuffers allocates --released blocks, grows each to twice the size
 * with reallocateMemory and frees it. Before the wait, warmUp runs
 * leakBuffers --warmup times (two blocks each, freed by warmUp) so that the
 * JIT compiles it and its frames are named.
 */
public final class DirectLeak {
    static sun.misc.Unsafe unsafe;

    /** Keeps the leaked addresses reachable until exit. */
    static long[] retained;

    public static void main(String[] args) throws Exception {
        String waitFile = null;
        long holdMs = 0;
        int leaked = 40, released = 25, warmup = 20000;
        long size = 65536;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                usage("missing value for " + a);
            }
            String v = args[++i];
            switch (a) {
                case "--wait-file": waitFile = v; break;
                case "--hold": holdMs = Long.parseLong(v); break;
                case "--leaked": leaked = Integer.parseInt(v); break;
                case "--released": released = Integer.parseInt(v); break;
                case "--warmup": warmup = Integer.parseInt(v); break;
                case "--size": size = Long.parseLong(v); break;
                default: usage("unknown option " + a);
            }
        }
        Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
        f.setAccessible(true);
        unsafe = (sun.misc.Unsafe) f.get(null);

        long t0 = System.nanoTime();
        warmUp(warmup, size);
        System.err.printf("DirectLeak: warmed up in %d ms; waiting for %s%n", (System.nanoTime() - t0) / 1000000, waitFile);
        if (waitFile != null) {
            while (!Files.exists(Paths.get(waitFile))) {
                Thread.sleep(10);
            }
        }
        retained = new long[leaked];
        leakBuffers(retained, leaked, size);
        releaseBuffers(released, size);
        System.err.printf("DirectLeak: leaked %d blocks of %d bytes in leakBuffers; released %d in releaseBuffers; pid %d%n",
                leaked, size, released, ProcessHandle.current().pid());
        Thread.sleep(holdMs);
        long sum = 0;
        for (long addr : retained) {
            sum += addr;
        }
        if (sum == 42) {
            System.err.println("unreachable");
        }
    }

    /** Runs leakBuffers until the JIT compiles it; frees what it allocates. */
    static void warmUp(int rounds, long size) {
        long[] out = new long[2];
        for (int r = 0; r < rounds; r++) {
            leakBuffers(out, 2, size);
            unsafe.freeMemory(out[0]);
            unsafe.freeMemory(out[1]);
        }
    }

    /** Allocates n blocks of size bytes into out: the caller keeps them. */
    static void leakBuffers(long[] out, int n, long size) {
        for (int i = 0; i < n; i++) {
            out[i] = unsafe.allocateMemory(size);
        }
    }

    /** Allocates n blocks, doubles each with reallocateMemory, frees it. */
    static void releaseBuffers(int n, long size) {
        for (int i = 0; i < n; i++) {
            long addr = unsafe.allocateMemory(size);
            addr = unsafe.reallocateMemory(addr, 2 * size);
            unsafe.freeMemory(addr);
        }
    }

    static void usage(String msg) {
        System.err.println("DirectLeak: " + msg);
        System.err.println("usage: DirectLeak [--wait-file F] [--hold MS] [--leaked N] [--released M] [--warmup R] [--size BYTES]");
        System.exit(2);
    }
}
