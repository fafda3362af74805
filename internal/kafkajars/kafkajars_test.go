package kafkajars

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompileAndRun compiles a tiny program against kafka-clients and
// runs it: the jars are complete enough to load the client's classes.
func TestCompileAndRun(t *testing.T) {
	src := t.TempDir()
	prog := `public class Hello {
  public static void main(String[] a) {
    System.out.println("kafka-clients " + org.apache.kafka.common.utils.internals.AppInfoParser.getVersion());
  }
}
`
	if err := os.WriteFile(filepath.Join(src, "Hello.java"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	cp := NeedCompiled(t, src)
	out, err := exec.Command("java", "-cp", cp, "Hello").CombinedOutput()
	if err != nil {
		t.Fatalf("java: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "kafka-clients 4.4.0" {
		t.Fatalf("got %q, want kafka-clients 4.4.0", got)
	}
}
