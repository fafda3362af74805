package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/internal/auth"
	"github.com/strata-io/strata/protocol"
	"github.com/strata-io/strata/replication"
)

// The identity of Strata's own Kafka clients between brokers -- the
// dead-letter writer, the transaction markers, share-group state reads,
// the backlog checks, the console -- as Kafka gives its brokers one: they
// connect to the inter-broker listener (inter.broker.listener.name, or
// security.inter.broker.protocol naming the listener of that name), with
// its security protocol: TLS with the listener's own keystore as client
// certificate and its truststore (else the system's CAs) to verify the
// other brokers, and SASL with sasl.mechanism.inter.broker.protocol and
// the username and password of the listener's JAAS setting for that
// mechanism. With ACLs on, their principal (User:<username>, or on an SSL
// listener User:<the keystore certificate's subject>) is what super.users
// must name: nothing needs User:ANONYMOUS.

// interBrokerSettings are the inter-broker identity's settings.
var interBrokerSettings = []setting{
	{"security.inter.broker.protocol", "", "Kafka's older way to pick the inter-broker listener: the listener named after this protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL). Not together with inter.broker.listener.name."},
	{"sasl.mechanism.inter.broker.protocol", "", "The SASL mechanism Strata's own clients use on a SASL inter-broker listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; default: the first of these the listener enables. Credentials: username and password of listener.name.<listener>.<mechanism>.sasl.jaas.config."},
}

// interBrokerClient is the identity of the broker's own clients.
type interBrokerClient struct {
	Protocol  string
	TLS       *tls.Config // nil unless SSL or SASL_SSL
	Mechanism string      // "" unless SASL
	User      string
	password  string
	// Principal is how the brokers' ACLs see these clients.
	Principal string
}

// opts are the kgo options that give a client this identity.
func (ib interBrokerClient) opts() []kgo.Opt {
	var out []kgo.Opt
	if ib.TLS != nil {
		out = append(out, kgo.DialTLSConfig(ib.TLS.Clone()))
	}
	switch ib.Mechanism {
	case auth.MechPlain:
		out = append(out, kgo.SASL(plain.Auth{User: ib.User, Pass: ib.password}.AsMechanism()))
	case auth.MechScramSHA256:
		out = append(out, kgo.SASL(scram.Auth{User: ib.User, Pass: ib.password}.AsSha256Mechanism()))
	case auth.MechScramSHA512:
		out = append(out, kgo.SASL(scram.Auth{User: ib.User, Pass: ib.password}.AsSha512Mechanism()))
	}
	return out
}

// consoleOpts are opts for a client that dials the broker's own listener
// on a loopback address: TLS verifies the certificate against the
// advertised host, the name it carries.
func (ib interBrokerClient) consoleOpts(advertisedHost string) []kgo.Opt {
	opts := ib.opts()
	if ib.TLS != nil {
		c := ib.TLS.Clone()
		c.ServerName = advertisedHost
		opts[0] = kgo.DialTLSConfig(c)
	}
	return opts
}

// interBrokerListener picks the inter-broker listener's index in ls.
func interBrokerListener(merged map[string]rawValue, ls []listenerConfig) (int, error) {
	bad := func(name, why string) error {
		rv := merged[name]
		return fmt.Errorf("%w: invalid value %q for %s (from %s): %s", errConfig, rv.value, name, rv.origin, why)
	}
	inter := strings.ToUpper(strings.TrimSpace(merged["inter.broker.listener.name"].value))
	proto := strings.ToUpper(strings.TrimSpace(merged["security.inter.broker.protocol"].value))
	if inter != "" && proto != "" {
		return 0, bad("security.inter.broker.protocol", "set either inter.broker.listener.name or security.inter.broker.protocol, not both (as Kafka)")
	}
	if proto != "" {
		switch proto {
		case protocol.ProtoPlaintext, protocol.ProtoSSL, protocol.ProtoSASLPlaintext, protocol.ProtoSASLSSL:
		default:
			return 0, bad("security.inter.broker.protocol", "expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
		}
		for i, l := range ls {
			if l.Name == proto {
				return i, nil
			}
		}
		return 0, bad("security.inter.broker.protocol", fmt.Sprintf("no listener is named %s (it names the listener of that name, as in Kafka; or use inter.broker.listener.name)", proto))
	}
	if inter != "" {
		for i, l := range ls {
			if l.Name == inter {
				return i, nil
			}
		}
		return 0, bad("inter.broker.listener.name", "names no listener of listeners")
	}
	for i, l := range ls {
		if l.Name == "PLAINTEXT" {
			return i, nil
		}
	}
	return 0, nil
}

// parseInterBrokerClient builds the identity of the broker's own clients
// on listener l (the inter-broker one).
func parseInterBrokerClient(merged map[string]rawValue, get func(l, n string) (string, string), l listenerConfig) (interBrokerClient, error) {
	ib := interBrokerClient{Protocol: l.Protocol, Principal: protocol.AnonymousPrincipal}
	if l.TLS != nil {
		var s auth.TLSSettings
		s.TruststoreType, _ = get(l.Name, "ssl.truststore.type")
		s.TruststoreLocation, _ = get(l.Name, "ssl.truststore.location")
		s.TruststorePassword, _ = get(l.Name, "ssl.truststore.password")
		s.TruststoreCertificates, _ = get(l.Name, "ssl.truststore.certificates")
		pool, err := auth.LoadTruststore(s)
		if err != nil {
			return ib, fmt.Errorf("%w: the inter-broker listener %s: %v", errConfig, l.Name, err)
		}
		// The listener's own certificate is the client certificate too,
		// as in Kafka (one keystore per listener).
		ib.TLS = &tls.Config{RootCAs: pool, Certificates: l.TLS.Certificates, MinVersion: tls.VersionTLS12}
		if l.Protocol == protocol.ProtoSSL && len(l.TLS.Certificates) > 0 && l.TLS.Certificates[0].Leaf != nil {
			ib.Principal = auth.CertPrincipal(l.TLS.Certificates[0].Leaf)
		}
	}
	if l.Protocol != protocol.ProtoSASLPlaintext && l.Protocol != protocol.ProtoSASLSSL {
		return ib, nil
	}
	mech, mechName := get(l.Name, "sasl.mechanism.inter.broker.protocol")
	mech = strings.ToUpper(strings.TrimSpace(mech))
	if mech == "" {
		for _, m := range l.Mechanisms {
			if m == auth.MechPlain || m == auth.MechScramSHA256 || m == auth.MechScramSHA512 {
				mech = m
				break
			}
		}
		if mech == "" {
			return ib, fmt.Errorf("%w: the inter-broker listener %s enables no mechanism Strata's own clients can use (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", errConfig, l.Name)
		}
	}
	switch mech {
	case auth.MechPlain, auth.MechScramSHA256, auth.MechScramSHA512:
	default:
		return ib, fmt.Errorf("%w: %s=%s (from %s): Strata's own clients speak PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", errConfig, mechName, mech, merged[mechName].origin)
	}
	enabled := false
	for _, m := range l.Mechanisms {
		enabled = enabled || m == mech
	}
	if !enabled {
		return ib, fmt.Errorf("%w: sasl.mechanism.inter.broker.protocol is %s, which the inter-broker listener %s does not enable (%s)", errConfig, mech, l.Name, strings.Join(l.Mechanisms, ","))
	}
	jaasKey := strings.ToLower(mech) + ".sasl.jaas.config"
	jaas, jaasName := get(l.Name, jaasKey)
	if jaas == "" {
		jaas, jaasName = get(l.Name, "sasl.jaas.config")
	}
	need := fmt.Errorf("%w: the inter-broker listener %s uses SASL %s: give the broker's own credentials as username and password in listener.name.%s.%s",
		errConfig, l.Name, mech, strings.ToLower(l.Name), jaasKey)
	if jaas == "" {
		return ib, need
	}
	_, o, err := auth.ParseJAAS(jaas)
	if err != nil {
		return ib, fmt.Errorf("%w: %s (from %s): %v", errConfig, jaasName, merged[jaasName].origin, err)
	}
	if o["username"] == "" || o["password"] == "" {
		return ib, need
	}
	if mech == auth.MechPlain && l.PlainUsers[o["username"]] != o["password"] {
		return ib, fmt.Errorf("%w: %s: the broker's own username %q must also be a PLAIN user of the listener with the same password (user_%s=\"...\")",
			errConfig, jaasName, o["username"], o["username"])
	}
	ib.Mechanism, ib.User, ib.password = mech, o["username"], o["password"]
	ib.Principal = "User:" + ib.User
	return ib, nil
}

// ensureInterBrokerScram creates the broker's own SCRAM credential (the
// inter-broker identity's, from its JAAS setting) in the cluster metadata
// when it is missing, as kafka-storage format --add-scram seeds a KRaft
// cluster's: without it a cluster whose only listeners are SASL could
// never authenticate its own clients, nor anyone to create users. An
// existing credential is left alone; if the password does not match it,
// the broker's clients will be refused, and that is logged here.
func ensureInterBrokerScram(ctx context.Context, b *replication.Broker, ib interBrokerClient, logger *slog.Logger) {
	if ib.Mechanism != auth.MechScramSHA256 && ib.Mechanism != auth.MechScramSHA512 {
		return
	}
	if have, ok := b.ScramCredential(ib.User, ib.Mechanism); ok {
		got, err := auth.NewScramCredential(ib.Mechanism, ib.password, have.Salt, have.Iterations)
		if err != nil || !bytes.Equal(got.StoredKey, have.StoredKey) {
			logger.Error("the inter-broker SCRAM user exists with another password: Strata's own clients will fail to authenticate; fix the JAAS password or reset the user",
				"user", ib.User, "mechanism", ib.Mechanism)
		}
		return
	}
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		logger.Error("creating the inter-broker SCRAM user failed", "user", ib.User, "err", err)
		return
	}
	cred, err := auth.NewScramCredential(ib.Mechanism, ib.password, salt, 8192)
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = b.AlterScramCredentials(cctx, []replication.ScramChange{{User: ib.User, Mechanism: ib.Mechanism, Credential: &cred}})
		cancel()
	}
	if err != nil {
		logger.Error("creating the inter-broker SCRAM user failed; Strata's own clients cannot authenticate until it exists", "user", ib.User, "mechanism", ib.Mechanism, "err", err)
		return
	}
	logger.Info("created the inter-broker SCRAM user from the inter-broker listener's JAAS setting", "user", ib.User, "mechanism", ib.Mechanism)
}
