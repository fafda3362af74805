import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs Kafka's command-line tools one after another inside this one JVM,
 * for internal/e2e/kafka_tools_test.go: starting a JVM per tool would cost
 * a second or two of CPU each on the CI machine.
 *
 * <p>Each line on stdin is a JSON object {"main": class, "args": [...],
 * "stdin": text}; the runner calls that class's main method with System.in,
 * System.out and System.err replaced, and answers one JSON line on its own
 * stdout: {"exit": code, "out": text, "err": text}. Kafka's tools leave
 * through org.apache.kafka.common.utils.internals.Exit, whose procedures
 * are replaced here by one that records the first code and throws, so a
 * tool's exit ends only its own call; a main method that returns exits 0,
 * one that throws exits 1 with the stack trace on its stderr (as the java
 * launcher does). Shutdown hooks tools register are not run.
 */
public class ToolRunner {
  /** Thrown by the replaced exit procedure to leave a tool's main. */
  static final class ExitSignal extends RuntimeException {
    ExitSignal(int code) {
      super("exit " + code, null, false, false);
    }
  }

  /** The first exit code of the current call, or null. */
  private static Integer exitCode;

  public static void main(String[] argv) throws Exception {
    ObjectMapper json = new ObjectMapper();
    PrintStream reply = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
    InputStream realIn = System.in;
    PrintStream realErr = System.err;
    Exit.Procedure exit = (code, msg) -> {
      synchronized (ToolRunner.class) {
        if (exitCode == null) {
          exitCode = code;
        }
      }
      throw new ExitSignal(code);
    };
    Exit.setExitProcedure(exit);
    Exit.setHaltProcedure(exit);
    Exit.setShutdownHookAdder((name, hook) -> { });
    // Between calls, stray output (a tool's leftover thread) goes to stderr,
    // never into the replies.
    System.setOut(realErr);
    BufferedReader in = new BufferedReader(new InputStreamReader(realIn, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) {
        continue;
      }
      JsonNode cmd = json.readTree(line);
      String main = cmd.get("main").asText();
      String[] args = new String[cmd.get("args").size()];
      for (int i = 0; i < args.length; i++) {
        args[i] = cmd.get("args").get(i).asText();
      }
      String stdin = cmd.has("stdin") ? cmd.get("stdin").asText() : "";

      ByteArrayOutputStream out = new ByteArrayOutputStream();
      ByteArrayOutputStream err = new ByteArrayOutputStream();
      PrintStream toolOut = new PrintStream(out, true, "UTF-8");
      PrintStream toolErr = new PrintStream(err, true, "UTF-8");
      synchronized (ToolRunner.class) {
        exitCode = null;
      }
      System.setIn(new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)));
      System.setOut(toolOut);
      System.setErr(toolErr);
      int code = 0;
      long start = System.nanoTime();
      try {
        Method m = Class.forName(main).getMethod("main", String[].class);
        m.invoke(null, (Object) args);
      } catch (InvocationTargetException e) {
        Throwable cause = e.getCause();
        if (!(cause instanceof ExitSignal)) {
          code = 1;
          cause.printStackTrace(toolErr);
        }
      } catch (Throwable e) {
        code = 1;
        e.printStackTrace(toolErr);
      } finally {
        toolOut.flush();
        toolErr.flush();
        System.setIn(realIn);
        System.setOut(realErr);
        System.setErr(realErr);
      }
      synchronized (ToolRunner.class) {
        if (exitCode != null) {
          code = exitCode;
        }
      }
      // A tool that catches Throwable around its own exit (TopicCommand's
      // mainNoExit) prints the signal; that is this runner's, not the tool's.
      String errText = err.toString(StandardCharsets.UTF_8);
      for (int c : new int[] {code, 0, 1}) {
        String msg = "exit " + c;
        errText = errText.replace(msg + "\n" + ExitSignal.class.getName() + ": " + msg + "\n", "");
      }
      ObjectNode res = json.createObjectNode();
      res.put("exit", code);
      res.put("out", out.toString(StandardCharsets.UTF_8));
      res.put("err", errText);
      res.put("millis", (System.nanoTime() - start) / 1_000_000);
      reply.println(json.writeValueAsString(res));
    }
    // Threads a tool left behind must not keep the JVM up once the test
    // closes stdin.
    Runtime.getRuntime().exit(0);
  }
}
