// Package auth holds the security of Strata's Kafka listeners: TLS
// configurations built from Kafka's ssl.* settings, and the server side of
// the SASL mechanisms PLAIN and SCRAM-SHA-256/512. It knows nothing of the
// Kafka protocol's framing (protocol/sasl.go drives it) nor of where SCRAM
// credentials are stored (the replicated metadata, replication/metadata_scram.go).
package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/pkcs12"
)

// TLSSettings are one listener's ssl.* settings, by Kafka's names.
type TLSSettings struct {
	KeystoreType      string // ssl.keystore.type: PEM or PKCS12 (JKS refused)
	KeystoreLocation  string // ssl.keystore.location
	KeystorePassword  string // ssl.keystore.password (PKCS12)
	KeyPassword       string // ssl.key.password (encrypted PEM keys are refused)
	KeystoreCertChain string // ssl.keystore.certificate.chain: inline PEM
	KeystoreKey       string // ssl.keystore.key: inline PEM

	TruststoreType         string // ssl.truststore.type: PEM or PKCS12
	TruststoreLocation     string // ssl.truststore.location
	TruststorePassword     string // ssl.truststore.password (PKCS12)
	TruststoreCertificates string // ssl.truststore.certificates: inline PEM

	ClientAuth string // ssl.client.auth: none, requested, required
}

// ServerConfig builds a listener's TLS configuration: its certificate from
// the keystore, and, when ssl.client.auth asks for client certificates,
// the CAs that sign them from the truststore. readFile is os.ReadFile
// outside tests.
func ServerConfig(s TLSSettings) (*tls.Config, error) {
	cert, err := loadKeystore(s)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	switch strings.ToLower(strings.TrimSpace(s.ClientAuth)) {
	case "", "none":
		cfg.ClientAuth = tls.NoClientCert
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("ssl.client.auth=%q: expected none, requested or required", s.ClientAuth)
	}
	if cfg.ClientAuth != tls.NoClientCert {
		pool, err := LoadTruststore(s)
		if err != nil {
			return nil, err
		}
		if pool == nil {
			return nil, fmt.Errorf("ssl.client.auth=%s needs ssl.truststore.location or ssl.truststore.certificates (the CA that signs client certificates)", s.ClientAuth)
		}
		cfg.ClientCAs = pool
	}
	return cfg, nil
}

func storeType(t string) (string, error) {
	switch u := strings.ToUpper(strings.TrimSpace(t)); u {
	case "", "PEM":
		return "PEM", nil
	case "PKCS12", "P12", "PFX":
		return "PKCS12", nil
	case "JKS":
		return "", errors.New("JKS key stores are not supported: convert the store to PKCS12 (keytool -importkeystore -srcstoretype JKS -deststoretype PKCS12) or PEM")
	default:
		return "", fmt.Errorf("store type %q: expected PEM or PKCS12", t)
	}
}

// loadKeystore returns the listener's certificate chain and private key.
func loadKeystore(s TLSSettings) (tls.Certificate, error) {
	if s.KeystoreCertChain != "" || s.KeystoreKey != "" {
		if s.KeystoreCertChain == "" || s.KeystoreKey == "" {
			return tls.Certificate{}, errors.New("ssl.keystore.certificate.chain and ssl.keystore.key go together")
		}
		return pemPair([]byte(s.KeystoreCertChain), []byte(s.KeystoreKey), "ssl.keystore.key")
	}
	if s.KeystoreLocation == "" {
		return tls.Certificate{}, errors.New("a TLS listener needs ssl.keystore.location (or ssl.keystore.certificate.chain and ssl.keystore.key)")
	}
	typ, err := storeType(s.KeystoreType)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("ssl.keystore.type: %w", err)
	}
	data, err := os.ReadFile(s.KeystoreLocation)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("ssl.keystore.location: %w", err)
	}
	if typ == "PKCS12" {
		blocks, err := pkcs12.ToPEM(data, s.KeystorePassword)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("ssl.keystore.location %s: PKCS12: %w (Strata reads PKCS12 files with golang.org/x/crypto/pkcs12, which knows the legacy encryption only: write the file with `openssl pkcs12 -export -legacy`, or use PEM)", s.KeystoreLocation, err)
		}
		var certs, keys []byte
		for _, b := range blocks {
			if b.Type == "PRIVATE KEY" {
				keys = append(keys, pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: b.Bytes})...)
			} else if b.Type == "CERTIFICATE" {
				certs = append(certs, pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: b.Bytes})...)
			}
		}
		return pemPair(certs, keys, "ssl.keystore.location")
	}
	// A PEM keystore holds the key and the chain in one file.
	return pemPair(data, data, "ssl.keystore.location")
}

// pemPair parses a certificate chain and its private key (PEM).
func pemPair(certPEM, keyPEM []byte, name string) (tls.Certificate, error) {
	for rest := keyPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" || b.Headers["Proc-Type"] != "" {
			return tls.Certificate{}, fmt.Errorf("%s: encrypted PEM private keys are not supported (ssl.key.password); store the key unencrypted in a file only the broker can read, or use PKCS12", name)
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", name, err)
	}
	return cert, nil
}

// LoadTruststore returns the CAs of ssl.truststore.* (nil: none set).
func LoadTruststore(s TLSSettings) (*x509.CertPool, error) {
	var data []byte
	typ := "PEM"
	switch {
	case s.TruststoreCertificates != "":
		data = []byte(s.TruststoreCertificates)
	case s.TruststoreLocation != "":
		var err error
		if typ, err = storeType(s.TruststoreType); err != nil {
			return nil, fmt.Errorf("ssl.truststore.type: %w", err)
		}
		if data, err = os.ReadFile(s.TruststoreLocation); err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
	default:
		return nil, nil
	}
	pool := x509.NewCertPool()
	if typ == "PKCS12" {
		blocks, err := pkcs12.ToPEM(data, s.TruststorePassword)
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location %s: PKCS12: %w (golang.org/x/crypto/pkcs12 knows the legacy encryption only; a PEM file of CA certificates always works)", s.TruststoreLocation, err)
		}
		for _, b := range blocks {
			if b.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("ssl.truststore.location: %w", err)
			}
			pool.AddCert(c)
		}
		return pool, nil
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("ssl.truststore: no PEM certificate found")
	}
	return pool, nil
}

// CertPrincipal is the principal of a client authenticated by its
// certificate, as Kafka's default principal builder names it: User: and
// the subject's distinguished name (RFC 2253, e.g. User:CN=alice,O=acme).
func CertPrincipal(c *x509.Certificate) string {
	return "User:" + c.Subject.String()
}
