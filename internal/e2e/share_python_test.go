package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// venvPython returns the Python of the virtual environment .ci/run builds
// from internal/e2e/testdata/requirements.txt (STRATA_PYTHON_VENV names
// its interpreter), if it can import module. Without it the test skips,
// except under CI, where it fails: Debian's confluent-kafka (librdkafka
// 1.7) has no share consumer.
func venvPython(t *testing.T, module string) string {
	t.Helper()
	py := os.Getenv("STRATA_PYTHON_VENV")
	if py != "" {
		if err := exec.Command(py, "-c", "import "+module).Run(); err == nil {
			return py
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no Python with %s from PyPI (STRATA_PYTHON_VENV=%q; .ci/run installs internal/e2e/testdata/requirements.txt)", module, py)
	}
	t.Skipf("no Python with %s from PyPI: set STRATA_PYTHON_VENV to a venv's python with internal/e2e/testdata/requirements.txt installed", module)
	return ""
}

// TestShareConsumerLibrdkafka runs librdkafka's share consumer (through
// confluent-kafka-python's ShareConsumer) against one broker: explicit
// acknowledgements, ACCEPT, RELEASE (redelivered, then accepted) and
// REJECT (archived); the group ends with lag 0.
func TestShareConsumerLibrdkafka(t *testing.T) {
	py := venvPython(t, "confluent_kafka")
	b := startBroker(t, "", shareSettings...)
	st := shareTarget{seeds: []string{b.addr}, client: b.client, rf: 1}
	createShareTopic(t, st, "pyq", 1)
	cl := b.client()
	setGroupConfigs(t, cl, "py-workers", "share.auto.offset.reset", "earliest")
	var vals []string
	for i := range 50 {
		switch i {
		case 10:
			vals = append(vals, "reject-10")
		case 20:
			vals = append(vals, "release-20")
		default:
			vals = append(vals, strconv.Itoa(i))
		}
	}
	for _, v := range vals {
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "pyq", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	out := run(t, 90*time.Second, "", py, "testdata/confluent_share.py", b.addr, "pyq", "py-workers", "50")
	var res struct {
		Done, Accepted, Rejected, Released, Deliveries int
		Errors                                         []string
	}
	line := out[strings.LastIndex(strings.TrimRight(out, "\n"), "\n")+1:]
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatalf("share consumer output: %v\n%s", err, out)
	}
	if res.Done != 50 || res.Accepted != 49 || res.Rejected != 1 || res.Released != 1 || res.Deliveries != 51 {
		t.Fatalf("librdkafka share consumer: %+v, want 50 done (49 accepted, 1 rejected), 1 released, 51 deliveries", res)
	}
	waitShareDone(t, kadm.NewClient(cl), "py-workers", "pyq", 1, 30*time.Second)
}
