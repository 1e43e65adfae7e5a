import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * DirectChurn allocates direct ByteBuffers without pause for --ms
 * milliseconds (default 60000), dropping them 1024 at a time and asking for
 * a GC, so that the Cleaner frees them: a JVM busy with direct memory at
 * the moment leakscope attaches. It prints "DirectChurn: warmed up" once
 * churn is compiled (after 20000 buffers). Nothing leaks.
 */
public final class DirectChurn {
    static final List<ByteBuffer> kept = new ArrayList<>();
    static long sink;

    public static void main(String[] args) throws Exception {
        long ms = 60000;
        if (args.length == 2 && args[0].equals("--ms")) {
            ms = Long.parseLong(args[1]);
        }
        long end = System.nanoTime() + ms * 1_000_000L;
        for (int i = 0; System.nanoTime() < end; ) {
            sink += churn(i++);
            if ((i & 1023) == 0) {
                kept.clear();
                System.gc();
                Thread.sleep(1);
            }
            if (i == 20000) {
                System.err.println("DirectChurn: warmed up");
                System.err.flush();
            }
        }
    }

    static long churn(int i) {
        ByteBuffer b = ByteBuffer.allocateDirect(4096);
        kept.add(b);
        return b.capacity() + i;
    }
}
