import java.lang.reflect.Executable;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.Inflater;

import jdk.test.whitebox.WhiteBox;

/**
 * Recompile leaks zlib inflate streams (java.util.zip.Inflater, never
 * ended) from one call path, main → round → use → open → new Inflater()
 * → Inflater.init (native), while the code on that path changes: first
 * interpreted, Inflater.init through the interpreter's native entry; then
 * compiled (C1, then C2) and through Inflater.init's native wrapper; then,
 * after WhiteBox.deoptimizeMethod threw that code and the wrapper away,
 * interpreted again and compiled again, with a new wrapper. Needs
 * -Xbootclasspath/a:WHITEBOX_CLASSES -XX:+UnlockDiagnosticVMOptions
 * -XX:+WhiteBoxAPI.
 *
 * Ground truth (examples/README.md): after --wait-file, every stream is
 * opened in open(); use keeps every --keep-every-th one of a round and
 * ends the others. Its last line counts the streams opened and leaked,
 * and says at each phase whether use and Inflater.init were compiled.
 */
public final class Recompile {
    static final List<Inflater> kept = new ArrayList<>();
    static long opened, leaked;

    /** open is where every stream of the path is made. */
    static Inflater open() {
        return new Inflater();
    }

    /** use opens a stream and keeps it (a leak) or ends it. */
    static void use(boolean keep) {
        Inflater inf = open();
        opened++;
        if (keep) {
            kept.add(inf);
            leaked++;
        } else {
            inf.end();
        }
    }

    /** round calls use n times, keeping every keepEvery-th stream. */
    static void round(int n, int keepEvery) {
        for (int i = 0; i < n; i++) {
            use(i % keepEvery == 0);
        }
    }

    public static void main(String[] args) throws Exception {
        String waitFile = null;
        long holdMs = 0;
        int hot = 40000, keepEvery = 4000, cold = 8;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--wait-file": waitFile = args[i + 1]; break;
                case "--hold": holdMs = Long.parseLong(args[i + 1]); break;
                case "--hot": hot = Integer.parseInt(args[i + 1]); break;
                case "--keep-every": keepEvery = Integer.parseInt(args[i + 1]); break;
                case "--cold": cold = Integer.parseInt(args[i + 1]); break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        WhiteBox wb = WhiteBox.WB;
        Executable use = Recompile.class.getDeclaredMethod("use", boolean.class);
        Executable init = Inflater.class.getDeclaredMethod("init", boolean.class);
        System.err.printf("Recompile: warmed up; waiting for %s%n", waitFile);
        if (waitFile != null) {
            while (!Files.exists(Paths.get(waitFile))) {
                Thread.sleep(10);
            }
        }
        StringBuilder phases = new StringBuilder();
        String[] names = {"cold", "hot", "deoptimized", "hot again"};
        for (int phase = 0; phase < 4; phase++) {
            if (phase == 2) {
                // A compilation queued by the hot round may still be
                // installed after a first deoptimization: let them end,
                // and deoptimize until nothing is compiled (10 tries).
                for (int i = 0; i < 10 && (i == 0 || wb.isMethodCompiled(use, false) || wb.isMethodCompiled(init, false)); i++) {
                    Thread.sleep(100);
                    wb.deoptimizeMethod(use, false);
                    wb.deoptimizeMethod(init, false);
                }
            }
            boolean useBefore = wb.isMethodCompiled(use, false), initBefore = wb.isMethodCompiled(init, false);
            boolean isCold = phase % 2 == 0;
            round(isCold ? cold : hot, isCold ? 1 : keepEvery); // one call site: one path
            phases.append(String.format(" %s: use %s, Inflater.init %s;", names[phase],
                    compiled(useBefore, wb.getMethodCompilationLevel(use, false)), wrapped(initBefore, wb.isMethodCompiled(init, false))));
        }
        System.err.printf("Recompile: opened %d streams in open, leaked %d;%s pid %d%n", opened, leaked, phases, ProcessHandle.current().pid());
        Thread.sleep(holdMs);
    }

    static String compiled(boolean before, int levelAfter) {
        return (before ? "compiled" : "interpreted") + " then level " + levelAfter;
    }

    static String wrapped(boolean before, boolean after) {
        return (before ? "wrapper" : "native entry") + " then " + (after ? "wrapper" : "native entry");
    }
}
