package store

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SecretKeySize is the length of a secret key: AES-256.
const SecretKeySize = 32

// Keyring holds the keys runner secrets are sealed with: the primary one seals, every key
// (the primary and the previous ones kept during a rotation) opens. It never prints a key.
type Keyring struct {
	primary  secretKey
	previous []secretKey
}

type secretKey struct {
	id  string // hex of the first 8 bytes of sha256(key)
	aes cipher.AEAD
}

// ErrSecretUnreadable: a stored secret was sealed with a key this server does not hold (or
// its bytes were changed).
var ErrSecretUnreadable = errors.New("secret sealed with another key")

// NewKeyring builds a keyring from raw keys: the primary first, then previous ones.
func NewKeyring(primary []byte, previous ...[]byte) (*Keyring, error) {
	p, err := newSecretKey(primary)
	if err != nil {
		return nil, fmt.Errorf("primary secret key: %w", err)
	}
	k := &Keyring{primary: p}
	for i, raw := range previous {
		pk, err := newSecretKey(raw)
		if err != nil {
			return nil, fmt.Errorf("previous secret key %d: %w", i+1, err)
		}
		if pk.id != p.id {
			k.previous = append(k.previous, pk)
		}
	}
	return k, nil
}

// NewRandomKeyring returns a keyring with one fresh key, known only to this process: for
// tests and tools that never need to read a secret after they exit. `loopx serve` always
// builds its keyring from LOOPX_SECRET_KEY or LOOPX_HOME.
func NewRandomKeyring() *Keyring {
	k, _ := NewKeyring(NewSecretKey()) // a fresh key of the right size cannot fail
	return k
}

// NewSecretKey returns a fresh random key.
func NewSecretKey() []byte {
	b := make([]byte, SecretKeySize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}

// ParseSecretKey reads a key written as base64 (standard or URL alphabet, padded or not) or
// as 64 hex digits.
func ParseSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*SecretKeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != SecretKeySize {
				return nil, fmt.Errorf("is %d bytes; a secret key is %d bytes (e.g. openssl rand -base64 32)", len(b), SecretKeySize)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("is not base64 or hex; make one with: openssl rand -base64 32")
}

// FormatSecretKey writes a key as base64.
func FormatSecretKey(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

func newSecretKey(raw []byte) (secretKey, error) {
	if len(raw) != SecretKeySize {
		return secretKey{}, fmt.Errorf("is %d bytes, want %d", len(raw), SecretKeySize)
	}
	blk, err := aes.NewCipher(raw)
	if err != nil {
		return secretKey{}, err
	}
	aead, err := cipher.NewGCM(blk)
	if err != nil {
		return secretKey{}, err
	}
	sum := sha256.Sum256(raw)
	return secretKey{id: hex.EncodeToString(sum[:8]), aes: aead}, nil
}

// PrimaryID names the key that seals (never the key itself).
func (k *Keyring) PrimaryID() string { return k.primary.id }

// seal encrypts value for the secret named by aad (goal, agent, name), so a sealed value
// cannot be moved to another agent or name.
func (k *Keyring) seal(aad, value string) (sealed []byte, keyID string) {
	nonce := make([]byte, k.primary.aes.NonceSize())
	_, _ = rand.Read(nonce)
	return k.primary.aes.Seal(nonce, nonce, []byte(value), []byte(aad)), k.primary.id
}

// open decrypts a sealed value with the key keyID names.
func (k *Keyring) open(aad string, sealed []byte, keyID string) (string, error) {
	for _, key := range append([]secretKey{k.primary}, k.previous...) {
		if key.id != keyID {
			continue
		}
		n := key.aes.NonceSize()
		if len(sealed) < n {
			return "", ErrSecretUnreadable
		}
		plain, err := key.aes.Open(nil, sealed[:n], sealed[n:], []byte(aad))
		if err != nil {
			return "", ErrSecretUnreadable
		}
		return string(plain), nil
	}
	return "", ErrSecretUnreadable
}

func secretAAD(goalID, agentID, name string) string {
	return "loopx-runner-secret\x00" + goalID + "\x00" + agentID + "\x00" + name
}
