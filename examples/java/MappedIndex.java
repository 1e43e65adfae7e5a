import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * MappedIndex keeps what a Java heap does not show: file mappings and
 * threads. The classic index-file leak: openSegment maps each segment's
 * index with FileChannel.map, closes the channel and keeps the
 * MappedByteBuffer (the mapping lives as long as the buffer); and
 * startWorkers starts threads that park forever.
 *
 * Ground truth (examples/README.md), after --wait-file: openSegment maps
 * --segments files (30) of --size bytes (262144) each, touching every
 * page, and keeps the buffers; startWorkers starts --workers (8) threads
 * parked forever, each with the JVM's default stack size. Before the
 * wait, warmUp maps and releases nothing the capture sees (it runs before
 * attach) so that the code paths are loaded.
 */
public final class MappedIndex {
    /** Keeps the mapped buffers reachable until exit. */
    static final List<MappedByteBuffer> index = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        String waitFile = null, dir = null;
        long holdMs = 0;
        int segments = 30, workers = 8, size = 262144;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                usage("missing value for " + a);
            }
            String v = args[++i];
            switch (a) {
                case "--wait-file": waitFile = v; break;
                case "--hold": holdMs = Long.parseLong(v); break;
                case "--dir": dir = v; break;
                case "--segments": segments = Integer.parseInt(v); break;
                case "--workers": workers = Integer.parseInt(v); break;
                case "--size": size = Integer.parseInt(v); break;
                default: usage("unknown option " + a);
            }
        }
        if (dir == null) {
            usage("--dir is required");
        }
        Path d = Paths.get(dir);
        Files.createDirectories(d);
        warmUp(d, size);
        System.err.printf("MappedIndex: warmed up; waiting for %s%n", waitFile);
        if (waitFile != null) {
            while (!Files.exists(Paths.get(waitFile))) {
                Thread.sleep(10);
            }
        }
        for (int i = 0; i < segments; i++) {
            index.add(openSegment(d.resolve(String.format("%08d.index", i)), size));
        }
        startWorkers(workers);
        System.err.printf("MappedIndex: leaked %d mappings of %d bytes in openSegment and %d parked threads in startWorkers; pid %d%n",
                segments, size, workers, ProcessHandle.current().pid());
        Thread.sleep(holdMs);
    }

    /** Maps a segment's index file and touches every page. */
    static MappedByteBuffer openSegment(Path file, int size) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            MappedByteBuffer b = ch.map(FileChannel.MapMode.READ_WRITE, 0, size);
            for (int off = 0; off < size; off += 4096) {
                b.put(off, (byte) 1);
            }
            return b;
        }
    }

    /** Starts n threads that park forever. */
    static void startWorkers(int n) {
        for (int i = 0; i < n; i++) {
            Thread t = new Thread(() -> {
                for (;;) {
                    LockSupport.park();
                }
            }, "worker-" + i);
            t.setDaemon(true);
            t.start();
        }
    }

    /** Loads the mapping and thread code paths before the wait. */
    static void warmUp(Path d, int size) throws IOException {
        MappedByteBuffer b = openSegment(d.resolve("warmup.index"), size);
        b.get(0);
        Thread t = new Thread(() -> { });
        t.start();
        try {
            t.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static void usage(String why) {
        System.err.println("MappedIndex: " + why);
        System.err.println("usage: MappedIndex --dir DIR [--segments N] [--size BYTES] [--workers N] [--wait-file PATH] [--hold MS]");
        System.exit(2);
    }
}
