import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;

/**
 * KafkaRecovery reproduces a native zlib leak the way a Kafka broker hits it
 * after an unclean shutdown: log recovery reads the first record of every
 * gzip-compressed batch to rebuild the offset index and never closes the
 * GZIPInputStream it opened. The Java heap holds almost nothing; each leaked
 * stream holds a z_stream in libz (inflateInit2_ without inflateEnd).
 *
 * Ground truth (examples/README.md): exactly --leaked inflate streams are
 * left open, all from recoverSegment; every stream opened by serveFetch
 * (--warmup before --wait-file, --closed after it) is closed. Every stream
 * object stays reachable until exit, so neither the GC nor the Cleaner ends
 * a stream behind the program's back.
 */
public final class KafkaRecovery {
    /** Records per batch; each is one line of text (--batch-records). */
    static int RECORDS_PER_BATCH = 32;

    /** Keeps every stream reachable: no Cleaner may end a leaked stream. */
    static final List<InputStream> retained = new ArrayList<>();

    /** Keeps writeSnapshot's streams reachable, as retained does. */
    static final List<GZIPOutputStream> retainedOut = new ArrayList<>();

    /** Defeats dead-code elimination of the values the loops compute. */
    static long sink;

    public static void main(String[] args) throws Exception {
        String waitFile = null;
        long holdMs = 0;
        int leaked = 50, closed = 100, warmup = 2000, plain = 2000, batchMs = 20;
        long throughputMs = 0;
        int leakedDeflate = 0;
        boolean virtual = false;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                usage("missing value for " + a);
            }
            String v = args[++i];
            switch (a) {
                case "--wait-file": waitFile = v; break;
                case "--hold": holdMs = parse(a, v); break;
                case "--leaked": leaked = (int) parse(a, v); break;
                case "--closed": closed = (int) parse(a, v); break;
                case "--warmup": warmup = (int) parse(a, v); break;
                case "--plain": plain = (int) parse(a, v); break;
                case "--batch-ms": batchMs = (int) parse(a, v); break;
                case "--throughput-ms": throughputMs = parse(a, v); break;
                case "--batch-records": RECORDS_PER_BATCH = (int) parse(a, v); break;
                case "--leaked-deflate": leakedDeflate = (int) parse(a, v); break;
                case "--virtual": virtual = parse(a, v) != 0; break;
                default: usage("unknown option " + a);
            }
        }

        // The log: gzip batches for recovery and for fetches, and
        // uncompressed batches, which recovery reads in place.
        byte[][] recoveryBatches = new byte[leaked][];
        for (int b = 0; b < leaked; b++) {
            recoveryBatches[b] = gzipBatch(1_000_000L + b * RECORDS_PER_BATCH);
        }
        byte[][] fetchBatches = new byte[16][];
        for (int b = 0; b < fetchBatches.length; b++) {
            fetchBatches[b] = gzipBatch(b * RECORDS_PER_BATCH);
        }
        byte[] plainBatch = plainBatch(500_000L);

        long warmStart = System.nanoTime();
        // Warm-up: the broker has served traffic and recovered uncompressed
        // segments for a while, so the JIT has compiled the paths below.
        for (int i = 0; i < warmup; i++) {
            sink += serveFetch(fetchBatches[i % fetchBatches.length]);
        }
        for (int i = 0; i < plain; i++) {
            sink += recoverSegment(plainBatch, false);
        }

        if (waitFile != null) {
            System.err.printf("KafkaRecovery: warmed up in %d ms; waiting for %s; pid %d%n",
                    (System.nanoTime() - warmStart) / 1_000_000, waitFile, ProcessHandle.current().pid());
            System.err.flush();
            Path p = Paths.get(waitFile);
            while (!Files.exists(p)) {
                Thread.sleep(5);
            }
        }

        if (throughputMs > 0) {
            throughput(fetchBatches, plainBatch, throughputMs);
        }

        // The traced work: fetches that close their streams, then recovery
        // of the compressed batches, which leaks one stream per batch; on
        // a virtual thread with --virtual 1.
        long workStart = System.nanoTime();
        long[] result = new long[1];
        final int closedN = closed, batchMsN = batchMs, deflateN = leakedDeflate;
        Runnable work = () -> {
            try {
                result[0] = traced(fetchBatches, recoveryBatches, closedN, batchMsN, deflateN);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        };
        if (virtual) {
            onVirtualThread(work);
        } else {
            work.run();
        }
        long offsets = result[0];

        System.err.printf("KafkaRecovery: leaked %d inflate streams in recoverSegment; closed %d inflate streams in serveFetch"
                + " (+%d warm-up before the wait); leaked %d deflate streams in writeSnapshot; recovered %d offsets;"
                + " retained %d streams; pid %d; work %d ms%n",
                leaked, closed, warmup, leakedDeflate, offsets, retained.size() + retainedOut.size(), ProcessHandle.current().pid(),
                (System.nanoTime() - workStart) / 1_000_000);
        System.err.flush();
        if (holdMs > 0) {
            Thread.sleep(holdMs);
        }
        if (sink == 42) {
            System.err.println("unlikely");
        }
    }

    /** traced is the work after the wait: it returns the offsets recovered. */
    static long traced(byte[][] fetchBatches, byte[][] recoveryBatches, int closed, int batchMs, int leakedDeflate)
            throws IOException, InterruptedException {
        for (int i = 0; i < closed; i++) {
            sink += serveFetch(fetchBatches[i % fetchBatches.length]);
        }
        long offsets = recoverLog(recoveryBatches, batchMs);
        for (int i = 0; i < leakedDeflate; i++) {
            sink += writeSnapshot(offsets + i);
        }
        return offsets;
    }

    /**
     * onVirtualThread runs r on a virtual thread (JDK 21 and later) and
     * waits for it. Through reflection, so that the file still compiles
     * with javac 11 or 17.
     */
    static void onVirtualThread(Runnable r) throws Exception {
        Object builder = Thread.class.getMethod("ofVirtual").invoke(null);
        Thread t = (Thread) Class.forName("java.lang.Thread$Builder").getMethod("start", Runnable.class).invoke(builder, r);
        t.join();
    }

    /**
     * throughput runs the broker's steady state for ms milliseconds: one
     * fetch of a gzip batch (a stream opened, read whole and closed) and one
     * recovery read of an uncompressed batch per operation, as in the
     * warm-up, and prints the rate (bench/run.sh compares it with and
     * without leakscope). No stream leaks here.
     */
    static void throughput(byte[][] fetchBatches, byte[] plainBatch, long ms) throws IOException {
        long start = System.nanoTime(), end = start + ms * 1_000_000L, ops = 0, now;
        do {
            for (int i = 0; i < 100; i++, ops++) {
                sink += serveFetch(fetchBatches[(int) (ops % fetchBatches.length)]);
                sink += recoverSegment(plainBatch, false);
            }
            now = System.nanoTime();
        } while (now < end);
        System.err.printf("KafkaRecovery: throughput %.1f ops/s (%d ops in %d ms)%n",
                ops * 1e9 / (now - start), ops, (now - start) / 1_000_000);
        System.err.flush();
    }

    /**
     * recoverLog rebuilds the offset index of a segment of gzip batches,
     * reading each from "disk" (batchMs of sleep), so the leak grows over
     * time as it does in a broker.
     */
    static long recoverLog(byte[][] batches, int batchMs) throws IOException, InterruptedException {
        long n = 0;
        for (byte[] batch : batches) {
            if (batchMs > 0) {
                Thread.sleep(batchMs);
            }
            n += recoverSegment(batch, true) >= 0 ? 1 : 0;
        }
        return n;
    }

    /**
     * recoverSegment returns the base offset of one batch: the offset of its
     * first record. Uncompressed batches are read in place; for a gzip batch
     * it opens a GZIPInputStream, reads the first record and returns.
     * BUG: the stream is never closed, so its native inflate state is never
     * ended (retained keeps it reachable, as a long-lived index would).
     */
    static long recoverSegment(byte[] batch, boolean compressed) throws IOException {
        InputStream in;
        if (compressed) {
            in = new GZIPInputStream(new ByteArrayInputStream(batch));
            retained.add(in);
        } else {
            in = new ByteArrayInputStream(batch);
        }
        return firstOffset(in);
    }

    /**
     * writeSnapshot writes the producer state at offset to a gzip snapshot
     * file (here, memory) and flushes it.
     * BUG: the stream is never finished or closed, so its native deflate
     * state is never ended (--leaked-deflate of them, after recovery).
     */
    static long writeSnapshot(long offset) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        GZIPOutputStream gz = new GZIPOutputStream(out, true);
        retainedOut.add(gz);
        gz.write(("snapshot offset=" + offset + "\n").getBytes(StandardCharsets.US_ASCII));
        gz.flush();
        return out.size();
    }

    /** serveFetch decompresses a whole batch for a consumer and closes the stream. */
    static long serveFetch(byte[] batch) throws IOException {
        try (GZIPInputStream in = new GZIPInputStream(new ByteArrayInputStream(batch))) {
            byte[] buf = new byte[4096];
            long total = 0;
            for (int n; (n = in.read(buf)) > 0; ) {
                total += n;
            }
            return total;
        }
    }

    /** firstOffset parses the leading "offset=N " of the first record. */
    static long firstOffset(InputStream in) throws IOException {
        long v = 0;
        int c;
        while ((c = in.read()) != '=') {
            if (c < 0) {
                return -1;
            }
        }
        while ((c = in.read()) >= '0' && c <= '9') {
            v = v * 10 + (c - '0');
        }
        return v;
    }

    static byte[] records(long base) {
        StringBuilder sb = new StringBuilder();
        for (int r = 0; r < RECORDS_PER_BATCH; r++) {
            sb.append("offset=").append(base + r)
              .append(" key=user-").append((base + r) % 977)
              .append(" value=").append("payload-".repeat(8)).append('\n');
        }
        return sb.toString().getBytes(StandardCharsets.US_ASCII);
    }

    static byte[] gzipBatch(long base) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (GZIPOutputStream gz = new GZIPOutputStream(out)) {
            gz.write(records(base));
        }
        return out.toByteArray();
    }

    static byte[] plainBatch(long base) {
        return records(base);
    }

    static long parse(String opt, String v) {
        try {
            long n = Long.parseLong(v);
            if (n < 0) {
                usage(opt + " must not be negative");
            }
            return n;
        } catch (NumberFormatException e) {
            usage("bad number for " + opt + ": " + v);
            return 0;
        }
    }

    static void usage(String why) {
        System.err.println("KafkaRecovery: " + why);
        System.err.println("usage: java KafkaRecovery [--wait-file PATH] [--hold MS] [--leaked N] [--closed N] [--warmup N] [--plain N] [--batch-ms MS] [--throughput-ms MS] [--batch-records N] [--leaked-deflate N] [--virtual 0|1]");
        System.exit(2);
    }
}
