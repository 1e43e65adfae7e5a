// LoadLoop loads N copies of a tiny shared library, one every 20 ms
// (System.load of DIR/libI.so), then prints how long the loop and the JVM
// took: under leakscope run each load stops the JVM twice (bench/jvmloads.sh).
public class LoadLoop {
    public static void main(String[] args) throws Exception {
        long t0 = System.nanoTime();
        int n = Integer.parseInt(args[1]);
        for (int i = 1; i <= n; i++) {
            System.load(args[0] + "/lib" + i + ".so");
            Thread.sleep(20);
        }
        System.out.println("loaded " + n + " in " + (System.nanoTime() - t0) / 1000000 + " ms; JVM up " + java.lang.management.ManagementFactory.getRuntimeMXBean().getUptime() + " ms");
    }
}
