package bot

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	lark "github.com/larksuite/oapi-sdk-go/v3"
)

// Transports for Config.Transport.
const (
	TransportWS   = "ws"
	TransportHTTP = "http"
)

// Config is the Lark app the bot acts as.
type Config struct {
	AppID             string
	AppSecret         string
	VerificationToken string
	EncryptKey        string
	// BaseURL is the open platform: lark.FeishuBaseUrl (default), lark.LarkBaseUrl for Lark
	// international, or the sandbox's URL.
	BaseURL   string
	Transport string // TransportWS (default) or TransportHTTP
}

// ConfigFromEnv reads LARK_APP_ID, LARK_APP_SECRET, LARK_VERIFICATION_TOKEN, LARK_ENCRYPT_KEY,
// LARK_BASE_URL and LARK_TRANSPORT through getenv, fills defaults and validates the result.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		AppID:             strings.TrimSpace(getenv("LARK_APP_ID")),
		AppSecret:         strings.TrimSpace(getenv("LARK_APP_SECRET")),
		VerificationToken: strings.TrimSpace(getenv("LARK_VERIFICATION_TOKEN")),
		EncryptKey:        strings.TrimSpace(getenv("LARK_ENCRYPT_KEY")),
		BaseURL:           strings.TrimSpace(getenv("LARK_BASE_URL")),
		Transport:         strings.ToLower(strings.TrimSpace(getenv("LARK_TRANSPORT"))),
	}
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Configured reports whether any Lark credential was given; with none, serve runs the sandbox.
func Configured(getenv func(string) string) bool {
	return getenv("LARK_APP_ID") != "" || getenv("LARK_APP_SECRET") != ""
}

func (c Config) withDefaults() Config {
	if c.BaseURL == "" {
		c.BaseURL = lark.FeishuBaseUrl
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Transport == "" {
		c.Transport = TransportWS
	}
	return c
}

// Validate names the first setting that is missing or wrong. HTTP callbacks must be
// authenticated, so that transport needs a verification token or an encrypt key.
func (c Config) Validate() error {
	var errs []error
	if c.AppID == "" {
		errs = append(errs, errors.New("LARK_APP_ID is empty: copy the App ID (cli_...) from the developer console, Credentials & Basic Info"))
	}
	if c.AppSecret == "" {
		errs = append(errs, errors.New("LARK_APP_SECRET is empty: copy the App Secret from the developer console, Credentials & Basic Info"))
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("LARK_BASE_URL %q is not an http(s) URL: use %s, %s or the sandbox URL", c.BaseURL, lark.FeishuBaseUrl, lark.LarkBaseUrl))
	}
	switch c.Transport {
	case TransportWS:
	case TransportHTTP:
		if c.VerificationToken == "" && c.EncryptKey == "" {
			errs = append(errs, errors.New("LARK_TRANSPORT=http needs LARK_VERIFICATION_TOKEN or LARK_ENCRYPT_KEY (both recommended): without them anyone could post events"))
		}
	default:
		errs = append(errs, fmt.Errorf("LARK_TRANSPORT %q is not ws or http", c.Transport))
	}
	return errors.Join(errs...)
}
