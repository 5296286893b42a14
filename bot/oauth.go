package bot

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	larkauthen "github.com/larksuite/oapi-sdk-go/v3/service/authen/v1"
)

// Sign in with Lark: the open platform's OAuth, through the SDK's authen API. The workspace
// sends a person to AuthorizeURL; Lark returns them with a one-time code, which PersonFromCode
// exchanges (with the app's access token) for the person's token and then their open_id.

// AuthorizeURL is the Lark page that asks the person to sign in to this app and returns them
// to redirectURI with a code and state.
func (c *Client) AuthorizeURL(redirectURI, state string) string {
	q := url.Values{"app_id": {c.cfg.AppID}, "redirect_uri": {redirectURI}, "state": {state}}
	return strings.TrimRight(c.cfg.BaseURL, "/") + "/open-apis/authen/v1/authorize?" + q.Encode()
}

// withAppToken passes the app access token the code exchange needs (the SDK's own token
// cache is off in this client).
func withAppToken(tok string) larkcore.RequestOptionFunc {
	return func(o *larkcore.RequestOption) { o.AppAccessToken = tok }
}

// PersonFromCode exchanges a sign-in code for the open_id of the person who signed in.
func (c *Client) PersonFromCode(ctx context.Context, code string) (string, error) {
	app, err := c.sdk.GetAppAccessTokenBySelfBuiltApp(ctx, &larkcore.SelfBuiltAppAccessTokenReq{AppID: c.cfg.AppID, AppSecret: c.cfg.AppSecret})
	if err != nil {
		return "", fmt.Errorf("get app access token: %w", err)
	}
	if !app.Success() || app.AppAccessToken == "" {
		return "", fmt.Errorf("get app access token: lark code %d: %s", app.Code, app.Msg)
	}
	tok, err := c.sdk.Authen.V1.OidcAccessToken.Create(ctx, larkauthen.NewCreateOidcAccessTokenReqBuilder().
		Body(larkauthen.NewCreateOidcAccessTokenReqBodyBuilder().GrantType("authorization_code").Code(code).Build()).Build(),
		withAppToken(app.AppAccessToken))
	if err != nil {
		return "", fmt.Errorf("exchange the sign-in code: %w", err)
	}
	if !tok.Success() || tok.Data == nil || tok.Data.AccessToken == nil {
		return "", fmt.Errorf("exchange the sign-in code: lark code %d: %s", tok.Code, tok.Msg)
	}
	info, err := c.sdk.Authen.V1.UserInfo.Get(ctx, larkcore.WithUserAccessToken(*tok.Data.AccessToken))
	if err != nil {
		return "", fmt.Errorf("read who signed in: %w", err)
	}
	if !info.Success() || info.Data == nil || info.Data.OpenId == nil || *info.Data.OpenId == "" {
		return "", fmt.Errorf("read who signed in: lark code %d: %s", info.Code, info.Msg)
	}
	return *info.Data.OpenId, nil
}
