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

// WithDefaults fills in the open platform (Feishu) and the transport (ws) when unset.
func (c Config) WithDefaults() Config {
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
