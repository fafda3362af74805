package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/strata-io/strata/internal/auth"
	"github.com/strata-io/strata/replication/transport"
)

// Broker-to-broker security (issue 19, item 1; README, "Securing a
// cluster"; replication/transport/tls.go): the replication listener and
// every connection a broker opens to a peer's replication listener speak
// mutual TLS with node certificates of the cluster's CA, configured by
// Kafka-like settings under replication.* (the ssl.* names of a client
// listener, prefixed). PLAINTEXT stays the default on loopback (one
// machine: `strata serve`, `strata dev-cluster`); a plaintext replication
// listener bound to any other address needs
// replication.plaintext.allow.nonloopback=true.

const (
	replicationProtocolSetting = "replication.security.protocol"
	replicationAllowSetting    = "replication.plaintext.allow.nonloopback"
)

// replicationSecuritySettings are part of clusterSettings.
var replicationSecuritySettings = []setting{
	{replicationProtocolSetting, "PLAINTEXT", "Security of the replication listener and of every connection to a peer's (Strata-specific): PLAINTEXT, or SSL (mutual TLS: each broker presents a certificate of the cluster's CA whose URI SAN strata://node/<node.id> names it, made by `strata certs issue --node-id`, and verifies the peer's)."},
	{replicationAllowSetting, "false", "Allow a PLAINTEXT replication listener bound to an address other than loopback (Strata-specific). Without TLS a peer's node ID is its claim: anyone who reaches the port can pose as a broker. Refused at start unless this is true."},
	{"replication.ssl.keystore.type", "PEM", "The replication keystore's type: PEM or PKCS12 (as ssl.keystore.type)."},
	{"replication.ssl.keystore.location", "", "This broker's node certificate and key: a PEM file (key and chain, as `strata certs issue --node-id` writes) or a PKCS12 file."},
	{"replication.ssl.keystore.password", "", "The PKCS12 replication keystore's password."},
	{"replication.ssl.key.password", "", "Accepted for compatibility; encrypted PEM keys are refused (as ssl.key.password)."},
	{"replication.ssl.keystore.certificate.chain", "", "This broker's node certificate chain in PEM, inline (instead of replication.ssl.keystore.location)."},
	{"replication.ssl.keystore.key", "", "This broker's private key in PEM, inline (with replication.ssl.keystore.certificate.chain)."},
	{"replication.ssl.truststore.type", "PEM", "PEM or PKCS12: the CA that signs node certificates."},
	{"replication.ssl.truststore.location", "", "The cluster CA's certificate (`strata certs ca` writes ca.pem): peers' node certificates must chain to it."},
	{"replication.ssl.truststore.password", "", "The PKCS12 replication truststore's password."},
	{"replication.ssl.truststore.certificates", "", "The cluster CA's certificates in PEM, inline."},
}

// parseReplicationSecurity sets cfg.Cluster.TLS from the replication.*
// security settings, and refuses plaintext replication off loopback
// unless replication.plaintext.allow.nonloopback is set. It runs after
// cfg.Cluster.Bind is known (parseClusterSettings).
func parseReplicationSecurity(merged map[string]rawValue, cfg *Config) error {
	bad := func(name, why string) error { return badSetting(merged, name, why) }
	allow := false
	switch strings.ToLower(strings.TrimSpace(merged[replicationAllowSetting].value)) {
	case "true":
		allow = true
	case "false", "":
	default:
		return bad(replicationAllowSetting, "expected true or false")
	}
	cfg.Cluster.PlaintextAnywhere = allow
	switch proto := strings.ToUpper(strings.TrimSpace(merged[replicationProtocolSetting].value)); proto {
	case "PLAINTEXT", "":
		if cfg.Cluster.Bind == "" || allow {
			return nil
		}
		host, _, _ := net.SplitHostPort(cfg.Cluster.Bind)
		if loopbackHost(host) {
			return nil
		}
		return fmt.Errorf("%w: the replication listener binds %s, which is not a loopback address, and %s is PLAINTEXT: "+
			"any host that reaches that port could pose as a broker (without TLS a peer's node ID is only its claim). "+
			"Set %s=SSL with node certificates (README, \"Securing a cluster\"), or, on a network only the brokers reach, %s=true",
			errConfig, cfg.Cluster.Bind, replicationProtocolSetting, replicationProtocolSetting, replicationAllowSetting)
	case "SSL":
	default:
		return bad(replicationProtocolSetting, "expected PLAINTEXT or SSL (SASL is not used between brokers: the node certificate authenticates)")
	}
	var s auth.TLSSettings
	for _, f := range []struct {
		dst  *string
		name string
	}{
		{&s.KeystoreType, "ssl.keystore.type"}, {&s.KeystoreLocation, "ssl.keystore.location"},
		{&s.KeystorePassword, "ssl.keystore.password"}, {&s.KeyPassword, "ssl.key.password"},
		{&s.KeystoreCertChain, "ssl.keystore.certificate.chain"}, {&s.KeystoreKey, "ssl.keystore.key"},
		{&s.TruststoreType, "ssl.truststore.type"}, {&s.TruststoreLocation, "ssl.truststore.location"},
		{&s.TruststorePassword, "ssl.truststore.password"}, {&s.TruststoreCertificates, "ssl.truststore.certificates"},
	} {
		*f.dst = merged["replication."+f.name].value
	}
	if s.TruststoreLocation == "" && s.TruststoreCertificates == "" {
		return fmt.Errorf("%w: %s=SSL needs replication.ssl.truststore.location (the cluster CA's certificate, ca.pem of `strata certs ca`)",
			errConfig, replicationProtocolSetting)
	}
	// The keystore is loaded as a client listener's is (PEM or PKCS12,
	// JKS refused by name); client auth is always required.
	s.ClientAuth = "required"
	tc, err := auth.ServerConfig(s)
	if err != nil {
		return fmt.Errorf("%w: %s=SSL: %v (the settings are the ssl.* ones prefixed with replication.)", errConfig, replicationProtocolSetting,
			strings.ReplaceAll(err.Error(), "ssl.", "replication.ssl."))
	}
	if cfg.Cluster.Bind == "" && len(cfg.Cluster.Voters) == 0 {
		return fmt.Errorf("%w: %s=SSL needs controller.quorum.voters (a broker alone has no replication listener)", errConfig, replicationProtocolSetting)
	}
	cert := tc.Certificates[0]
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("%w: replication keystore: %v", errConfig, err)
	}
	id, err := auth.NodeIDFromCert(leaf)
	if err != nil {
		return fmt.Errorf("%w: replication keystore: %v: issue one with `strata certs issue --node-id %d`", errConfig, err, cfg.NodeID)
	}
	if id != cfg.NodeID {
		return fmt.Errorf("%w: replication keystore: the certificate names node %d (%s) but node.id is %d", errConfig, id, auth.NodeURI(id), cfg.NodeID)
	}
	// Peers verify it as a client's and as a server's certificate.
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: tc.ClientCAs, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return fmt.Errorf("%w: replication keystore: this broker's certificate does not verify against replication.ssl.truststore: %v", errConfig, err)
		}
	}
	cfg.Cluster.TLS = &transport.TLS{Certificate: cert, CAs: tc.ClientCAs}
	return nil
}

// loopbackHost reports whether host names loopback addresses only:
// an IP in 127.0.0.0/8 or ::1, or a name that resolves to such addresses
// alone (localhost).
func loopbackHost(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	if host == "" {
		return false // every interface
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return false
		}
	}
	return true
}
