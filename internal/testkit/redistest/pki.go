package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// certValidity is how long the certificates of a test PKI are valid: long
// enough for any test, short enough that a leaked one is worthless. They
// start a minute in the past so that a clock a little behind still accepts
// them.
const certValidity = time.Hour

// CA is a throwaway certificate authority for TLS tests: an ECDSA P-256 key
// and a self-signed CA certificate valid for an hour, made at test time and
// kept in memory and in one PEM file under the test's temporary directory.
type CA struct {
	cert     *x509.Certificate
	certPEM  []byte
	key      *ecdsa.PrivateKey
	certFile string
	dir      string
}

// ServerCert is a server certificate, its key and the certificate of the CA
// that issued it, as PEM files: what redis-server's --tls-cert-file,
// --tls-key-file and --tls-ca-cert-file take.
type ServerCert struct {
	CertFile string
	KeyFile  string
	CAFile   string
}

// NewCA makes a CA whose certificate carries name as its common name. It
// fails t if a key cannot be generated or a file cannot be written.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("new CA %s: generate key: %v", name, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serialNumber(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"redistest"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("new CA %s: self-sign: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("new CA %s: parse own certificate: %v", name, err)
	}
	ca := &CA{cert: cert, key: key, dir: t.TempDir()}
	ca.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	ca.certFile = filepath.Join(ca.dir, "ca.pem")
	writeFile(t, ca.certFile, ca.certPEM)
	return ca
}

// CertPEM returns the CA's certificate in PEM form.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// CertFile returns the path of a PEM file holding the CA's certificate.
func (ca *CA) CertFile() string { return ca.certFile }

// Pool returns a new certificate pool that trusts this CA and nothing else.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// Issue signs a server certificate, valid for an hour, for hosts: each one
// an IP address (an IP SAN) or a DNS name (a DNS SAN). It writes the
// certificate and its new key as PEM files and returns them with the CA's
// certificate file.
func (ca *CA) Issue(t testing.TB, hosts ...string) ServerCert {
	t.Helper()
	if len(hosts) == 0 {
		t.Fatal("issue server certificate: no host names")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("issue server certificate: generate key: %v", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(t),
		Subject:      pkix.Name{CommonName: hosts[0], Organization: []string{"redistest"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Client auth too: a cluster node presents its certificate when it
		// connects to its peers' buses over TLS.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("issue server certificate for %v: %v", hosts, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("issue server certificate for %v: encode key: %v", hosts, err)
	}
	dir, err := os.MkdirTemp(ca.dir, "server-")
	if err != nil {
		t.Fatalf("issue server certificate for %v: %v", hosts, err)
	}
	sc := ServerCert{
		CertFile: filepath.Join(dir, "cert.pem"),
		KeyFile:  filepath.Join(dir, "key.pem"),
		CAFile:   ca.certFile,
	}
	writeFile(t, sc.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, sc.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	return sc
}

// serialNumber returns a random 128-bit certificate serial number.
func serialNumber(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		t.Fatalf("certificate serial number: %v", err)
	}
	return n
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}
