// LateZip waits until the file GATE exists, then creates N Inflaters it
// never ends (its first use of java.util.zip: the JVM loads libzip.so
// then), and holds them MS ms. Usage: LateZip GATE N MS.
import java.io.*;
import java.nio.file.*;
import java.util.*;
import java.util.zip.*;

public class LateZip {
    public static void main(String[] args) throws Exception {
        Path gate = Paths.get(args[0]);
        int n = Integer.parseInt(args[1]);
        System.err.println("LateZip: waiting");
        while (!Files.exists(gate)) Thread.sleep(5);
        List<Inflater> keep = new ArrayList<>();
        for (int i = 0; i < n; i++) keep.add(new Inflater());
        System.err.println("LateZip: leaked " + keep.size());
        Thread.sleep(Long.parseLong(args[2]));
        System.out.println(keep.size());
    }
}
