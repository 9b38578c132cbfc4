package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Names of the CA files in the CA directory.
const (
	caCertName = "ca.pem"
	caKeyName  = "ca-key.pem"
)

// Validity periods. A leaf lives shorter than clients' limits for
// server certificates (398 days) and is minted again when it nears its end;
// the CA certificate is issued again from the same key when it expires.
const (
	caValidity    = 10 * 365 * 24 * time.Hour
	leafValidity  = 30 * 24 * time.Hour
	leafRenewal   = time.Hour // mint again when a cached leaf expires sooner than this
	clockSkewRoom = time.Hour // certificates start this long before they are made
)

// CA is the certificate authority that signs the tap's interception
// certificates. Its methods are safe for concurrent use.
type CA struct {
	certFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	leafKey  *ecdsa.PrivateKey // the key of every leaf: minting then costs one signature

	mu     sync.Mutex                  // guards leaves
	leaves map[string]*tls.Certificate // by comma-joined host names
}

// DefaultCADir returns the directory of the CA that acptap uses unless
// told otherwise: acptap under os.UserConfigDir.
func DefaultCADir() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("locating the CA directory: %w", err)
	}
	return filepath.Join(dir, "acptap"), nil
}

// LoadOrCreateCA returns the CA kept in dir as ca.pem and ca-key.pem,
// generating an ECDSA P-256 CA on first use. dir is created with mode 0700
// if missing and the key file is written with mode 0600. The key is the
// CA's identity: a missing, expired or mismatched ca.pem is issued again
// from it, with the same subject and key, so that certificates already
// trusted keep working. Processes creating the CA at the same time end up
// with the same key. If dir is empty, DefaultCADir() is used.
func LoadOrCreateCA(dir string) (*CA, error) {
	if dir == "" {
		d, err := DefaultCADir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the CA directory: %w", err)
	}
	key, err := loadOrCreateKey(filepath.Join(dir, caKeyName))
	if err != nil {
		return nil, err
	}
	certFile := filepath.Join(dir, caCertName)
	cert, err := loadCACert(certFile, key)
	if err != nil {
		return nil, err
	}
	if cert == nil {
		if cert, err = writeCACert(certFile, key); err != nil {
			return nil, err
		}
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the leaf key: %w", err)
	}
	return &CA{
		certFile: certFile,
		cert:     cert,
		key:      key,
		leafKey:  leafKey,
		leaves:   make(map[string]*tls.Certificate),
	}, nil
}

// CertFile returns the path of the CA certificate (PEM), which clients of
// the tap must trust.
func (ca *CA) CertFile() string { return ca.certFile }

// loadOrCreateKey reads the CA key at path, or generates and writes one.
func loadOrCreateKey(path string) (*ecdsa.PrivateKey, error) {
	key, err := readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the CA key: %w", err)
	}
	tmp, err := writeTemp(filepath.Dir(path), caKeyName, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	if err != nil {
		return nil, fmt.Errorf("writing the CA key: %w", err)
	}
	defer os.Remove(tmp)
	// A link, unlike a rename, fails when another process has created the
	// key meanwhile: then both use that one.
	err = os.Link(tmp, path)
	switch {
	case err == nil:
		return key, nil
	case errors.Is(err, fs.ErrExist):
		return readKey(path)
	}
	// Some file systems have no hard links.
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("writing the CA key: %w", err)
	}
	return key, nil
}

// readKey reads a PEM ECDSA private key (PKCS #8 or SEC 1).
func readKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the CA key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block: %w", path, ErrInvalidCA)
	}
	if block.Type == "EC PRIVATE KEY" {
		key, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", path, ErrInvalidCA, err)
		}
		return key, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrInvalidCA, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T, want an ECDSA key: %w", path, k, ErrInvalidCA)
	}
	return key, nil
}

// loadCACert reads the CA certificate at path. It returns nil, and no
// error, when the file is missing, holds no CA certificate or an expired
// one of key: the caller then issues a new one. A CA certificate of
// another key is ErrCAMismatch.
func loadCACert(path string, key *ecdsa.PrivateKey) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the CA certificate: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !cert.IsCA {
		return nil, nil
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		// One of the pair was replaced (copied from another machine, or
		// restored alone): issuing a new certificate would silently make
		// the one clients trust useless, so the user decides.
		return nil, fmt.Errorf("%s is not the certificate of the key %s: %w", path, filepath.Join(filepath.Dir(path), caKeyName), ErrCAMismatch)
	}
	if time.Now().After(cert.NotAfter) {
		return nil, nil
	}
	return cert, nil
}

// caSubject is the subject of every acptap CA. Keeping it fixed keeps a
// certificate issued again from the same key interchangeable with the
// old one.
var caSubject = pkix.Name{Organization: []string{"acptap"}, CommonName: "acptap interception CA"}

// writeCACert issues a self-signed CA certificate for key and writes it to
// path atomically.
func writeCACert(path string, key *ecdsa.PrivateKey) (*x509.Certificate, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               caSubject,
		NotBefore:             now.Add(-clockSkewRoom),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("issuing the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("issuing the CA certificate: %w", err)
	}
	tmp, err := writeTemp(filepath.Dir(path), caCertName, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	if err != nil {
		return nil, fmt.Errorf("writing the CA certificate: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("writing the CA certificate: %w", err)
	}
	return cert, nil
}

// writeTemp writes data to a new file in dir with the given mode, synced,
// and returns its name.
func writeTemp(dir, pattern string, data []byte, mode os.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, "."+pattern+".*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return n, nil
}

// leaf returns a server certificate for hosts (DNS names or IP addresses,
// without ports), minted on first use and cached.
func (ca *CA) leaf(hosts ...string) (*tls.Certificate, error) {
	names := make([]string, 0, len(hosts))
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
		if h != "" && !slices.Contains(names, h) {
			names = append(names, h)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("minting a certificate: no host name")
	}
	cacheKey := strings.Join(names, ",")

	// Minting holds the lock: it takes one signature, and concurrent
	// handshakes for a new host then wait for one certificate instead of
	// each minting their own.
	ca.mu.Lock()
	defer ca.mu.Unlock()
	now := time.Now()
	if c := ca.leaves[cacheKey]; c != nil && now.Add(leafRenewal).Before(c.Leaf.NotAfter) {
		return c, nil
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"acptap"}, CommonName: names[0]},
		NotBefore:    now.Add(-clockSkewRoom),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ca.cert.NotAfter.Before(tmpl.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("minting a certificate for %s: %w", cacheKey, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("minting a certificate for %s: %w", cacheKey, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: ca.leafKey, Leaf: leaf}
	ca.leaves[cacheKey] = c
	return c, nil
}
