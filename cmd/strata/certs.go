package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-io/strata/internal/auth"
)

// strata certs: a cluster CA and the certificates it signs, as PEM files
// the ssl.* settings read (README, "Securing a cluster"). strata user:
// SCRAM users (AlterUserScramCredentials, DescribeUserScramCredentials).

const certsUsage = `Usage:
  strata certs ca --dir DIR [--name NAME] [--days N]
      make a CA: DIR/ca.pem (the certificate: ssl.truststore.location for
      brokers and ssl.ca.location for clients) and DIR/ca.key (keep it safe)
  strata certs issue --dir DIR --name NAME [--host H1,H2,...] [--node-id ID] [--days N]
      sign a certificate for NAME (its subject is CN=NAME) with DIR's CA,
      valid for servers and clients, with the hosts (DNS names or IP
      addresses) as subject alternative names: DIR/NAME.pem is a PEM
      keystore (key and chain: ssl.keystore.location), DIR/NAME.crt the
      chain and DIR/NAME.key the key (for clients such as librdkafka).
      --node-id makes a node certificate for the replication listener
      (replication.ssl.keystore.location): the URI SAN strata://node/ID
      names the broker whose node.id is ID; --name defaults to node-ID
`

func certsCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, certsUsage)
		return exitOK
	}
	fs := flag.NewFlagSet("certs "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory of the CA and the certificates")
	name := fs.String("name", "", "the CA's or the certificate's common name")
	hosts := fs.String("host", "", "subject alternative names, comma-separated (DNS names or IP addresses)")
	days := fs.Int("days", 365, "validity in days")
	nodeID := fs.Int("node-id", -1, "issue a node certificate: its URI SAN strata://node/ID names the broker of node.id ID")
	if err := fs.Parse(args[1:]); err != nil {
		return parseExit(err)
	}
	if *dir == "" || *days <= 0 {
		fmt.Fprint(stderr, "strata certs: --dir is required and --days must be positive\n\n"+certsUsage)
		return exitConfig
	}
	validity := time.Duration(*days) * 24 * time.Hour
	write := func(name string, data []byte, mode os.FileMode) error {
		p := filepath.Join(*dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "wrote", p)
		return nil
	}
	var err error
	switch args[0] {
	case "ca":
		if *name == "" {
			*name = "strata-ca"
		}
		if _, serr := os.Stat(filepath.Join(*dir, "ca.key")); serr == nil {
			err = errors.New(filepath.Join(*dir, "ca.key") + " exists: not replacing a CA")
			break
		}
		var ca *auth.CA
		if ca, err = auth.NewCA(*name, validity); err == nil {
			if err = os.MkdirAll(*dir, 0o755); err == nil {
				if err = write("ca.key", ca.KeyPEM(), 0o600); err == nil {
					err = write("ca.pem", ca.CertPEM(), 0o644)
				}
			}
		}
	case "issue":
		if *nodeID > math.MaxInt32 || *nodeID < -1 {
			fmt.Fprintf(stderr, "strata certs issue: --node-id %d: a node.id is 0..%d\n", *nodeID, math.MaxInt32)
			return exitConfig
		}
		if *name == "" && *nodeID >= 0 {
			*name = fmt.Sprintf("node-%d", *nodeID)
		}
		if *name == "" || strings.ContainsAny(*name, "/\\") {
			fmt.Fprint(stderr, "strata certs issue: --name is required (no slashes)\n\n"+certsUsage)
			return exitConfig
		}
		var certPEM, keyPEM []byte
		if certPEM, err = os.ReadFile(filepath.Join(*dir, "ca.pem")); err != nil {
			break
		}
		if keyPEM, err = os.ReadFile(filepath.Join(*dir, "ca.key")); err != nil {
			break
		}
		var ca *auth.CA
		if ca, err = auth.LoadCA(certPEM, keyPEM); err != nil {
			break
		}
		var hs []string
		for _, h := range strings.Split(*hosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hs = append(hs, h)
			}
		}
		var is *auth.Issued
		var uris []string
		if *nodeID >= 0 {
			uris = append(uris, auth.NodeURI(int32(*nodeID)))
		}
		if is, err = ca.Issue(*name, hs, uris, validity); err != nil {
			break
		}
		if err = write(*name+".pem", is.KeystorePEM(ca), 0o600); err == nil {
			if err = write(*name+".crt", is.ChainPEM(ca), 0o644); err == nil {
				err = write(*name+".key", is.KeyPEM(), 0o600)
			}
		}
	default:
		fmt.Fprintf(stderr, "strata certs: unknown subcommand %q\n\n%s", args[0], certsUsage)
		return exitConfig
	}
	if err != nil {
		fmt.Fprintln(stderr, "strata certs:", err)
		return exitError
	}
	return exitOK
}

const userUsage = `Usage:
  strata user set NAME [--mechanism SCRAM-SHA-256|SCRAM-SHA-512|both] [--iterations N] [--bootstrap-server HOST:PORT]
      create or change a SCRAM user; the password is read from the first
      line of standard input (or STRATA_USER_PASSWORD). The broker keeps
      only a salted hash, replicated to every broker.
  strata user delete NAME [--mechanism ...]
  strata user list
The admin commands connect without TLS or SASL: point them at a PLAINTEXT
listener bound to loopback or a private network.
`

func userCommand(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, userUsage)
		return exitOK
	}
	sub := args[0]
	fs := flag.NewFlagSet("user "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a adminFlags
	a.register(fs, environ)
	mech := fs.String("mechanism", "both", "SCRAM-SHA-256, SCRAM-SHA-512 or both")
	iters := fs.Int("iterations", 8192, "PBKDF2 iterations (4096..16384)")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return parseExit(err)
	}
	var mechs []kadm.ScramMechanism
	switch strings.ToUpper(*mech) {
	case "BOTH":
		mechs = []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512}
	case auth.MechScramSHA256:
		mechs = []kadm.ScramMechanism{kadm.ScramSha256}
	case auth.MechScramSHA512:
		mechs = []kadm.ScramMechanism{kadm.ScramSha512}
	default:
		fmt.Fprintf(stderr, "strata user: --mechanism %q: expected SCRAM-SHA-256, SCRAM-SHA-512 or both\n", *mech)
		return exitConfig
	}
	if (sub == "set" || sub == "delete") && len(pos) != 1 || sub == "list" && len(pos) != 0 {
		fmt.Fprint(stderr, userUsage)
		return exitConfig
	}
	adm, ctx, closing, err := a.connect()
	if err != nil {
		fmt.Fprintln(stderr, "strata user:", err)
		return exitError
	}
	defer closing()
	switch sub {
	case "set":
		pass := envOr(environ, "STRATA_USER_PASSWORD", "")
		if pass == "" {
			line, _ := readLine(os.Stdin)
			pass = line
		}
		if pass == "" {
			fmt.Fprintln(stderr, "strata user set: no password on standard input or in STRATA_USER_PASSWORD")
			return exitConfig
		}
		var ups []kadm.UpsertSCRAM
		for _, m := range mechs {
			ups = append(ups, kadm.UpsertSCRAM{User: pos[0], Mechanism: m, Iterations: int32(*iters), Password: pass})
		}
		res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			fmt.Fprintln(stderr, "strata user set:", err)
			return exitError
		}
		fmt.Fprintf(stdout, "user %s set (%s)\n", pos[0], strings.ToUpper(*mech))
	case "delete":
		var dels []kadm.DeleteSCRAM
		for _, m := range mechs {
			dels = append(dels, kadm.DeleteSCRAM{User: pos[0], Mechanism: m})
		}
		res, err := adm.AlterUserSCRAMs(ctx, dels, nil)
		if err == nil {
			err = res.Error()
		}
		if err != nil && !(strings.ToUpper(*mech) == "BOTH" && strings.Contains(err.Error(), "RESOURCE_NOT_FOUND")) {
			fmt.Fprintln(stderr, "strata user delete:", err)
			return exitError
		}
		fmt.Fprintf(stdout, "user %s deleted\n", pos[0])
	case "list":
		d, err := adm.DescribeUserSCRAMs(ctx)
		if err == nil {
			err = d.Error()
		}
		if err != nil {
			fmt.Fprintln(stderr, "strata user list:", err)
			return exitError
		}
		for _, u := range d.Sorted() {
			var ms []string
			for _, ci := range u.CredInfos {
				ms = append(ms, fmt.Sprintf("%s(iterations=%d)", ci.Mechanism, ci.Iterations))
			}
			fmt.Fprintf(stdout, "%s %s\n", u.User, strings.Join(ms, " "))
		}
	default:
		fmt.Fprintf(stderr, "strata user: unknown subcommand %q\n\n%s", sub, userUsage)
		return exitConfig
	}
	return exitOK
}

// readLine reads one line from r, without its newline.
func readLine(r io.Reader) (string, error) {
	var b []byte
	buf := make([]byte, 1)
	for len(b) < 4096 {
		n, err := r.Read(buf)
		if n == 1 {
			if buf[0] == '\n' {
				break
			}
			b = append(b, buf[0])
		}
		if err != nil {
			break
		}
	}
	return strings.TrimRight(string(b), "\r"), nil
}
