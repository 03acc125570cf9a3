package agent

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"time"
)

// Creds are one side's TLS identity and the one certificate it accepts
// from its peer. The broker makes a fresh pair for every agent it starts
// and hands the agent its half on the agent's stdin (never in a file or
// the environment a workspace command could read): neither side trusts
// any CA, only the pinned certificate, so a command in the workspace can
// neither pose as the agent (it lacks the agent's key) nor connect to it
// (it lacks the broker's), and TLS binds the keys to the connection, so
// relaying a handshake gains nothing.
type Creds struct {
	Cert []byte `json:"cert"` // DER
	Key  []byte `json:"key"`  // PKCS #8 DER
	Peer []byte `json:"peer"` // the peer's certificate, DER
}

// NewCredsPair makes the agent's and the broker's halves.
func NewCredsPair() (agentSide, brokerSide Creds, err error) {
	aCert, aKey, err := selfSigned("wsb-agent")
	if err != nil {
		return Creds{}, Creds{}, err
	}
	bCert, bKey, err := selfSigned("wsbroker")
	if err != nil {
		return Creds{}, Creds{}, err
	}
	return Creds{Cert: aCert, Key: aKey, Peer: bCert}, Creds{Cert: bCert, Key: bKey, Peer: aCert}, nil
}

func selfSigned(name string) (cert, key []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
	}
	cert, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, nil, err
	}
	key, err = x509.MarshalPKCS8PrivateKey(priv)
	return cert, key, err
}

func (c Creds) certificate() (tls.Certificate, error) {
	k, err := x509.ParsePKCS8PrivateKey(c.Key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{c.Cert}, PrivateKey: k}, nil
}

// pin accepts exactly the peer's certificate.
func (c Creds) pin(raw [][]byte, _ [][]*x509.Certificate) error {
	if len(raw) != 1 || !bytes.Equal(raw[0], c.Peer) {
		return errors.New("agent: the peer's certificate is not the one pinned")
	}
	return nil
}

// ServerConfig is the agent's TLS configuration.
func (c Creds) ServerConfig() (*tls.Config, error) {
	cert, err := c.certificate()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:            tls.VersionTLS13,
		Certificates:          []tls.Certificate{cert},
		ClientAuth:            tls.RequireAnyClientCert,
		VerifyPeerCertificate: c.pin,
	}, nil
}

// ClientConfig is the broker's TLS configuration. Chain verification is
// off because the pin replaces it: only the one certificate is accepted.
func (c Creds) ClientConfig() (*tls.Config, error) {
	cert, err := c.certificate()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:            tls.VersionTLS13,
		Certificates:          []tls.Certificate{cert},
		InsecureSkipVerify:    true, //nolint:gosec // the pin in VerifyPeerCertificate replaces chain checks
		VerifyPeerCertificate: c.pin,
		ServerName:            "wsb-agent",
	}, nil
}
