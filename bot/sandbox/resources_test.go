package sandbox_test

import (
	"bytes"
	"io"
	"testing"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	"github.com/stretchr/testify/require"

	"loopx/bot/sandbox"
)

// Files as Lark has them, through the official SDK: a user's image is a resource of its
// message only; the bot uploads images and files and may send only keys it uploaded.
func TestResourcesAndUploads(t *testing.T) {
	t.Parallel()
	sb := start(t, sandbox.Options{})
	cli := client(sb)
	ctx := t.Context()
	image := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 4096)...)
	d, err := sb.UserSendsFile("oc_1", sandbox.ChatP2P, "ou_alice", "cat.png", image, "")
	require.NoError(t, err)
	m, ok := sb.Message(d.MessageID)
	require.True(t, ok)
	require.Equal(t, "image", m.MsgType, "a bare image in a direct chat is an image message")
	key := m.Content[len(`{"image_key":"`) : len(m.Content)-2]

	resp, err := cli.Im.V1.MessageResource.Get(ctx, larkim.NewGetMessageResourceReqBuilder().
		MessageId(d.MessageID).FileKey(key).Type("image").Build())
	require.NoError(t, err)
	require.True(t, resp.Success(), resp.Msg)
	got, err := io.ReadAll(resp.File)
	require.NoError(t, err)
	require.Equal(t, image, got)
	require.Equal(t, "cat.png", resp.FileName)

	other, err := sb.UserSays("oc_1", sandbox.ChatP2P, "ou_alice", "hello")
	require.NoError(t, err)
	resp, err = cli.Im.V1.MessageResource.Get(ctx, larkim.NewGetMessageResourceReqBuilder().
		MessageId(other.MessageID).FileKey(key).Type("image").Build())
	require.NoError(t, err)
	require.Equal(t, sandbox.CodeResourceNotFound, resp.Code, "a key is read only with its own message")

	up, err := cli.Im.V1.Image.Create(ctx, larkim.NewCreateImageReqBuilder().Body(larkim.NewCreateImageReqBodyBuilder().
		ImageType(larkim.CreateImageImageTypeMessage).Image(bytes.NewReader([]byte("not an image"))).Build()).Build())
	require.NoError(t, err)
	require.Equal(t, sandbox.CodeBadRequest, up.Code, "an upload that is no image is refused")
	up, err = cli.Im.V1.Image.Create(ctx, larkim.NewCreateImageReqBuilder().Body(larkim.NewCreateImageReqBodyBuilder().
		ImageType(larkim.CreateImageImageTypeMessage).Image(bytes.NewReader(image)).Build()).Build())
	require.NoError(t, err)
	require.True(t, up.Success(), up.Msg)
	fup, err := cli.Im.V1.File.Create(ctx, larkim.NewCreateFileReqBuilder().Body(larkim.NewCreateFileReqBodyBuilder().
		FileType("pdf").FileName("report.pdf").File(bytes.NewReader([]byte("%PDF-1.7 report"))).Build()).Build())
	require.NoError(t, err)
	require.True(t, fup.Success(), fup.Msg)

	send := func(msgType, content string) *larkim.CreateMessageResp {
		resp, err := cli.Im.V1.Message.Create(ctx, larkim.NewCreateMessageReqBuilder().ReceiveIdType("chat_id").
			Body(larkim.NewCreateMessageReqBodyBuilder().ReceiveId("oc_1").MsgType(msgType).Content(content).Build()).Build())
		require.NoError(t, err)
		return resp
	}
	require.True(t, send("image", `{"image_key":"`+*up.Data.ImageKey+`"}`).Success())
	require.True(t, send("file", `{"file_key":"`+*fup.Data.FileKey+`"}`).Success())
	require.Equal(t, sandbox.CodeBadRequest, send("image", `{"image_key":"`+key+`"}`).Code, "a user's key is not the app's to send")
	require.Empty(t, sb.Unmatched())
}
