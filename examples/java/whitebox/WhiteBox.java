package jdk.test.whitebox;

import java.lang.reflect.Executable;

/**
 * WhiteBox declares the few methods of HotSpot's WhiteBox testing API that
 * Recompile uses: HotSpot binds them when this class is on the boot class
 * path and the JVM runs with -XX:+UnlockDiagnosticVMOptions
 * -XX:+WhiteBoxAPI (product builds have both flags). HotSpot warns once
 * for each WhiteBox method it has and this class does not declare.
 */
public class WhiteBox {
    private static native void registerNatives();

    static {
        registerNatives();
    }

    public static final WhiteBox WB = new WhiteBox();

    /** deoptimizeMethod makes the method's compiled code (a native method's wrapper) not entrant. */
    public int deoptimizeMethod(Executable method, boolean isOsr) {
        return deoptimizeMethod0(method, isOsr);
    }

    /** isMethodCompiled reports whether the method has compiled code (a native method: its wrapper). */
    public boolean isMethodCompiled(Executable method, boolean isOsr) {
        return isMethodCompiled0(method, isOsr);
    }

    /** getMethodCompilationLevel is the tier of the method's compiled code, 0 if none. */
    public int getMethodCompilationLevel(Executable method, boolean isOsr) {
        return getMethodCompilationLevel0(method, isOsr);
    }

    private native int deoptimizeMethod0(Executable method, boolean isOsr);

    private native boolean isMethodCompiled0(Executable method, boolean isOsr);

    private native int getMethodCompilationLevel0(Executable method, boolean isOsr);
}
