package bot

// The advice on Lark's error codes lives here, once: the sender writes it into the outbox
// row it gives up on, /status shows it (through the router's Advice option) and
// `loopx doctor` prints it. The codes are named in client.go.

// codeRefusedLocally marks a row refused before sending (too large or malformed).
const codeRefusedLocally = 0

// Advice says what to do about a send Lark refused with code: hint is a stable word the chat
// templates phrase per language ("" when there is nothing better than Lark's own message),
// text is the same advice in English for operators.
func Advice(code int) (hint, text string) {
	switch code {
	case codeRefusedLocally:
		return "refused", "refused before sending (too large or malformed): the outbox row's last_error says why"
	case codeBotNotInChat:
		return "not_in_chat", "the bot is not in the chat: add the bot to the group"
	case codeBadRequest:
		return "bad_request", "Lark refused the message as invalid: report it with the outbox id"
	case codeScopeMissing:
		return "scope", "a scope is missing: enable the scope Lark names (see docs/lark-setup.md) and publish a version"
	case codeWrongAppID, codeWrongSecret:
		return "credentials", "wrong App ID or App Secret: check LARK_APP_ID and LARK_APP_SECRET"
	}
	return "", "see the outbox row's last_error"
}
