package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-io/strata/internal/auth"
	"github.com/strata-io/strata/protocol"
)

// Listener security, with Kafka's setting names: several listeners
// (listeners=NAME://host:port,...), each with a security protocol
// (listener.security.protocol.map; a listener named after a protocol
// has that protocol), TLS from ssl.* and SASL from sasl.* settings, each
// of which may be given per listener as listener.name.<name>.<setting>
// (name in lower case, as Kafka spells it).

// securitySettings are the broker-wide forms of the security settings.
var securitySettings = []setting{
	{"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "The security protocol of each listener name, NAME:PROTOCOL comma-separated; protocols: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL."},
	{"inter.broker.listener.name", "", "The listener whose advertised address is registered in the cluster metadata: the address other brokers and Strata's own clients (dead letters, transaction markers, share state, backlog checks, the console) use, with its security protocol and, on SASL, sasl.mechanism.inter.broker.protocol; default: the listener named PLAINTEXT, else the first one."},
	{"sasl.enabled.mechanisms", "", "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; default: SCRAM-SHA-256,SCRAM-SHA-512, plus PLAIN where a PLAIN JAAS configuration gives users."},
	{"sasl.oauthbearer.jwks.endpoint.url", "", "OAUTHBEARER: where the JWKS with the keys that sign tokens is (https://..., or file:/path); required to enable OAUTHBEARER. Tokens are JWTs signed RS256 or ES256, chosen by kid; the JWKS is read again (at most every 10 s) for an unknown kid."},
	{"sasl.oauthbearer.expected.audience", "", "OAUTHBEARER: audiences, comma-separated, one of which the token's aud must hold; empty: aud is not checked."},
	{"sasl.oauthbearer.expected.issuer", "", "OAUTHBEARER: the issuer the token's iss must be; empty: not checked."},
	{"sasl.oauthbearer.sub.claim.name", "sub", "OAUTHBEARER: the claim naming the principal (User:<claim>)."},
	{"sasl.oauthbearer.clock.skew.seconds", "30", "OAUTHBEARER: the clock difference allowed when checking exp, nbf and iat."},
	{"connections.max.reauth.ms", "0", "KIP-368: a SASL session's lifetime, told to clients in SaslAuthenticate; after it a request other than a re-authentication closes the connection. 0: no limit, except an OAUTHBEARER token's expiry."},
	{"ssl.keystore.type", "PEM", "PEM or PKCS12 (JKS is refused: convert it). A PEM keystore file holds the certificate chain and an unencrypted private key; PKCS12 files are read with golang.org/x/crypto/pkcs12 (legacy encryption: openssl pkcs12 -export -legacy)."},
	{"ssl.keystore.location", "", "The TLS listener's keystore file."},
	{"ssl.keystore.password", "", "The PKCS12 keystore's password."},
	{"ssl.key.password", "", "Accepted for compatibility; encrypted PEM keys are refused (store the key unencrypted, readable by the broker only)."},
	{"ssl.keystore.certificate.chain", "", "The certificate chain in PEM, inline (instead of ssl.keystore.location)."},
	{"ssl.keystore.key", "", "The private key in PEM, inline (with ssl.keystore.certificate.chain)."},
	{"ssl.truststore.type", "PEM", "PEM or PKCS12: the CAs that sign client certificates (ssl.client.auth)."},
	{"ssl.truststore.location", "", "The truststore file."},
	{"ssl.truststore.password", "", "The PKCS12 truststore's password."},
	{"ssl.truststore.certificates", "", "The trusted CA certificates in PEM, inline."},
	{"ssl.client.auth", "none", "Client certificates on SSL and SASL_SSL listeners: none, requested (verified when given) or required (mTLS). On an SSL listener a client with a certificate is User:<its subject DN>."},
}

// securitySuffixes are the settings that may be given per listener
// (listener.name.<l>.<suffix>), besides <mechanism>.sasl.jaas.config.
var securitySuffixes = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range securitySettings {
		if s.name != "listener.security.protocol.map" && s.name != "inter.broker.listener.name" {
			m[s.name] = true
		}
	}
	return m
}()

// isSecuritySetting accepts the per-listener forms.
func isSecuritySetting(name string) bool {
	rest, ok := strings.CutPrefix(name, "listener.name.")
	if !ok {
		return false
	}
	_, suffix, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	if securitySuffixes[suffix] || suffix == "sasl.jaas.config" {
		return true
	}
	mech, jaas, ok := strings.Cut(suffix, ".")
	if ok && mech == "oauthbearer" && strings.HasPrefix(jaas, "sasl.oauthbearer.") && securitySuffixes[jaas] {
		return true // listener.name.<l>.oauthbearer.sasl.oauthbearer.*, as Kafka spells them
	}
	return ok && jaas == "sasl.jaas.config" && mech != ""
}

// sensitiveSetting: secrets are kept out of DescribeConfigs' answers.
func sensitiveSetting(name string) bool {
	return strings.HasSuffix(name, ".password") || strings.HasSuffix(name, "sasl.jaas.config") ||
		strings.HasSuffix(name, "ssl.keystore.key") || strings.HasSuffix(name, "ssl.keystore.certificate.chain")
}

// listenerConfig is one listener.
type listenerConfig struct {
	Name       string   // as in listeners (upper case)
	Protocol   string   // PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
	Bind       Listener // where to listen
	Advertised Listener // the address clients are told
	TLS        *tls.Config
	Mechanisms []string
	PlainUsers auth.PlainUsers
	OAuth      *auth.OAuthValidator
	Reauth     time.Duration
}

// securityConfig is every listener; Listeners[0] is the inter-broker one
// (also Config.Listener and Config.Advertised).
type securityConfig struct {
	Listeners []listenerConfig
	// InterBroker is the identity of the broker's own Kafka clients
	// (interbroker_config.go).
	InterBroker interBrokerClient
}

// parseEndpoints parses NAME://host:port,... in order.
func parseEndpoints(s string) ([]Listener, error) {
	var out []Listener
	seen := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		name, hostport, ok := strings.Cut(p, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not NAME://host:port", p)
		}
		name = strings.ToUpper(name)
		if seen[name] {
			return nil, fmt.Errorf("listener %s given twice", name)
		}
		seen[name] = true
		host, portStr, err := net.SplitHostPort(hostport)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", p, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port < 0 || port > 65535 {
			return nil, fmt.Errorf("%q: port must be 0..65535", p)
		}
		out = append(out, Listener{Name: name, Host: host, Port: port})
	}
	if len(out) == 0 {
		return nil, errors.New("no listener given")
	}
	return out, nil
}

// parseSecuritySettings parses listeners, advertised.listeners and the
// security settings into cfg.Security, cfg.Listener and cfg.Advertised.
func parseSecuritySettings(merged map[string]rawValue, cfg *Config) error {
	bad := func(name, why string) error { return badSetting(merged, name, why) }
	get := func(listener, name string) (string, string) {
		prefixed := "listener.name." + strings.ToLower(listener) + "." + name
		if rv, ok := merged[prefixed]; ok {
			return rv.value, prefixed
		}
		return merged[name].value, name
	}
	binds, err := parseEndpoints(merged["listeners"].value)
	if err != nil {
		return bad("listeners", err.Error())
	}
	protoMap := map[string]string{}
	for _, p := range strings.Split(merged["listener.security.protocol.map"].value, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, proto, ok := strings.Cut(p, ":")
		proto = strings.ToUpper(strings.TrimSpace(proto))
		switch proto {
		case protocol.ProtoPlaintext, protocol.ProtoSSL, protocol.ProtoSASLPlaintext, protocol.ProtoSASLSSL:
		default:
			ok = false
		}
		if !ok {
			return bad("listener.security.protocol.map", fmt.Sprintf("%q is not NAME:PROTOCOL with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", p))
		}
		protoMap[strings.ToUpper(strings.TrimSpace(n))] = proto
	}
	adv := binds
	if rv, ok := merged["advertised.listeners"]; ok && rv.value != "" {
		if adv, err = parseEndpoints(rv.value); err != nil {
			return bad("advertised.listeners", err.Error())
		}
	}
	advByName := map[string]Listener{}
	for _, a := range adv {
		advByName[a.Name] = a
	}
	var out []listenerConfig
	for _, b := range binds {
		lc := listenerConfig{Name: b.Name, Bind: b}
		if lc.Protocol = protoMap[b.Name]; lc.Protocol == "" {
			return bad("listener.security.protocol.map", fmt.Sprintf("has no security protocol for listener %s", b.Name))
		}
		a, ok := advByName[b.Name]
		if !ok {
			if _, set := merged["advertised.listeners"]; set && merged["advertised.listeners"].value != "" {
				return bad("advertised.listeners", fmt.Sprintf("has no address for listener %s", b.Name))
			}
			a = b
			if a.Host == "" || isWildcard(a.Host) {
				rv := merged["listeners"]
				return fmt.Errorf("%w: listeners=%q (from %s) binds every interface; set advertised.listeners to the address clients should use",
					errConfig, rv.value, rv.origin)
			}
		} else if a.Host == "" || isWildcard(a.Host) {
			return bad("advertised.listeners", "needs a host clients can reach, not a wildcard")
		}
		lc.Advertised = a
		if lc.Protocol == protocol.ProtoSSL || lc.Protocol == protocol.ProtoSASLSSL {
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
				{&s.ClientAuth, "ssl.client.auth"},
			} {
				*f.dst, _ = get(b.Name, f.name)
			}
			if lc.TLS, err = auth.ServerConfig(s); err != nil {
				return fmt.Errorf("%w: listener %s: %v", errConfig, b.Name, err)
			}
		}
		if lc.Protocol == protocol.ProtoSASLPlaintext || lc.Protocol == protocol.ProtoSASLSSL {
			if err := parseListenerSASL(merged, get, &lc); err != nil {
				return err
			}
		}
		out = append(out, lc)
	}
	for _, a := range adv {
		found := false
		for _, b := range binds {
			found = found || b.Name == a.Name
		}
		if !found {
			return bad("advertised.listeners", fmt.Sprintf("names listener %s, which listeners does not", a.Name))
		}
	}
	// The inter-broker listener goes first.
	idx, err := interBrokerListener(merged, out)
	if err != nil {
		return err
	}
	out[0], out[idx] = out[idx], out[0]
	ib, err := parseInterBrokerClient(merged, get, out[0])
	if err != nil {
		return err
	}
	cfg.Security = securityConfig{Listeners: out, InterBroker: ib}
	cfg.Listener, cfg.Advertised = out[0].Bind, out[0].Advertised
	return nil
}

// parseListenerSASL reads a SASL listener's mechanisms and PLAIN users.
func parseListenerSASL(merged map[string]rawValue, get func(l, n string) (string, string), lc *listenerConfig) error {
	jaas, jaasName := get(lc.Name, "plain.sasl.jaas.config")
	if jaas == "" {
		jaas, jaasName = get(lc.Name, "sasl.jaas.config")
	}
	if jaas != "" {
		users, err := auth.PlainUsersFromJAAS(jaas)
		if err != nil {
			return fmt.Errorf("%w: %s (from %s): %v", errConfig, jaasName, merged[jaasName].origin, err)
		}
		lc.PlainUsers = users
	}
	if v, name := get(lc.Name, "connections.max.reauth.ms"); strings.TrimSpace(v) != "" {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || ms < 0 {
			return fmt.Errorf("%w: invalid value %q for %s (from %s): milliseconds >= 0", errConfig, v, name, merged[name].origin)
		}
		lc.Reauth = time.Duration(ms) * time.Millisecond
	}
	mechs, mechName := get(lc.Name, "sasl.enabled.mechanisms")
	if strings.TrimSpace(mechs) == "" {
		lc.Mechanisms = []string{auth.MechScramSHA256, auth.MechScramSHA512}
		if lc.PlainUsers != nil {
			lc.Mechanisms = append([]string{auth.MechPlain}, lc.Mechanisms...)
		}
		return nil
	}
	for _, m := range strings.Split(mechs, ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		switch m {
		case "":
			continue
		case auth.MechPlain:
			if lc.PlainUsers == nil {
				return fmt.Errorf("%w: %s enables PLAIN on listener %s but no PLAIN users are configured: set listener.name.%s.plain.sasl.jaas.config (org.apache.kafka.common.security.plain.PlainLoginModule required user_NAME=\"password\" ...;)",
					errConfig, mechName, lc.Name, strings.ToLower(lc.Name))
			}
		case auth.MechScramSHA256, auth.MechScramSHA512:
		case auth.MechOAuthBearer:
			if err := parseListenerOAuth(merged, get, lc); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: %s (from %s): mechanism %s is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are)",
				errConfig, mechName, merged[mechName].origin, m)
		}
		lc.Mechanisms = append(lc.Mechanisms, m)
	}
	if len(lc.Mechanisms) == 0 {
		return fmt.Errorf("%w: %s: no mechanism given", errConfig, mechName)
	}
	return nil
}

// parseListenerOAuth makes a listener's OAUTHBEARER validator from the
// sasl.oauthbearer.* settings (listener.name.<l>.oauthbearer.<setting>,
// listener.name.<l>.<setting>, then the broker-wide one).
func parseListenerOAuth(merged map[string]rawValue, get func(l, n string) (string, string), lc *listenerConfig) error {
	oget := func(n string) (string, string) {
		if v, name := get(lc.Name, "oauthbearer."+n); name != "oauthbearer."+n {
			return v, name
		}
		return get(lc.Name, n)
	}
	var st auth.OAuthSettings
	var urlName string
	st.JWKSURL, urlName = oget("sasl.oauthbearer.jwks.endpoint.url")
	if strings.TrimSpace(st.JWKSURL) == "" {
		return fmt.Errorf("%w: OAUTHBEARER is enabled on listener %s but sasl.oauthbearer.jwks.endpoint.url is not set (Strata validates tokens against a JWKS only)", errConfig, lc.Name)
	}
	for a := range strings.SplitSeq(first(oget("sasl.oauthbearer.expected.audience")), ",") {
		if a = strings.TrimSpace(a); a != "" {
			st.ExpectedAudience = append(st.ExpectedAudience, a)
		}
	}
	st.ExpectedIssuer = strings.TrimSpace(first(oget("sasl.oauthbearer.expected.issuer")))
	st.SubClaim = strings.TrimSpace(first(oget("sasl.oauthbearer.sub.claim.name")))
	if v, name := oget("sasl.oauthbearer.clock.skew.seconds"); strings.TrimSpace(v) != "" {
		sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || sec < 0 {
			return fmt.Errorf("%w: invalid value %q for %s (from %s): seconds >= 0", errConfig, v, name, merged[name].origin)
		}
		st.ClockSkew = time.Duration(sec) * time.Second
	} else {
		st.ClockSkew = 30 * time.Second
	}
	v, err := auth.NewOAuthValidator(st)
	if err != nil {
		return fmt.Errorf("%w: %s (from %s), listener %s: %v", errConfig, urlName, merged[urlName].origin, lc.Name, err)
	}
	lc.OAuth = v
	return nil
}

func first(v, _ string) string { return v }

// shown is a setting's value as an error message may show it.
func shown(name, v string) string {
	if sensitiveSetting(name) {
		return "[hidden]"
	}
	return v
}

// protocolListener is the protocol package's form of l; main says whether
// l is the inter-broker listener (whose address is the registered one).
func (l listenerConfig) protocolListener(main bool, advPort int) *protocol.ListenerSecurity {
	sec := &protocol.ListenerSecurity{Name: l.Name, Protocol: l.Protocol, TLS: l.TLS,
		Mechanisms: l.Mechanisms, PlainUsers: l.PlainUsers, OAuth: l.OAuth, ReauthAfter: l.Reauth}
	if !main {
		sec.AdvertisedHost, sec.AdvertisedPort = l.Advertised.Host, int32(advPort)
	}
	return sec
}

// endpointsString is BrokerInfo.Endpoints: every listener's advertised
// address, NAME://host:port, sorted by name. ports are the bound ports of
// listeners advertised with port 0.
func (s securityConfig) endpointsString(ports []int) string {
	var eps []string
	for i, l := range s.Listeners {
		eps = append(eps, l.Name+"://"+net.JoinHostPort(l.Advertised.Host, strconv.Itoa(ports[i])))
	}
	sort.Strings(eps)
	return strings.Join(eps, ",")
}

// extraListeners are the listeners besides the inter-broker one.
type extraListeners struct {
	main      *protocol.ListenerSecurity // the inter-broker listener's security
	lns       []net.Listener
	secs      []*protocol.ListenerSecurity
	endpoints string // BrokerInfo.Endpoints
}

// listenExtra binds every listener but the first (bound as main).
func listenExtra(cfg *Config, main net.Listener) (*extraListeners, error) {
	ls := cfg.Security.Listeners
	if len(ls) == 0 { // a Config not built by loadConfig (tests)
		return &extraListeners{}, nil
	}
	x := &extraListeners{}
	ports := []int{cfg.Advertised.Port}
	if ports[0] == 0 {
		ports[0] = main.Addr().(*net.TCPAddr).Port
	}
	x.main = ls[0].protocolListener(true, ports[0])
	for _, l := range ls[1:] {
		ln, err := net.Listen("tcp", net.JoinHostPort(l.Bind.Host, strconv.Itoa(l.Bind.Port)))
		if err != nil {
			for _, o := range x.lns {
				o.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", l.Bind, err)
		}
		port := l.Advertised.Port
		if port == 0 {
			port = ln.Addr().(*net.TCPAddr).Port
		}
		ports = append(ports, port)
		x.lns = append(x.lns, ln)
		x.secs = append(x.secs, l.protocolListener(false, port))
	}
	if len(ls) > 1 {
		x.endpoints = cfg.Security.endpointsString(ports)
	}
	return x, nil
}

// serve serves the extra listeners on srv; the first failure goes to errc.
func (x *extraListeners) serve(srv *protocol.Server, errc chan<- error) {
	for i, ln := range x.lns {
		go func() {
			if err := srv.ServeListener(ln, x.secs[i]); err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		}()
	}
}
