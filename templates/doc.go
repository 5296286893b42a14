// Package templates renders every message LoopX sends to Lark: plain-text replies and Lark
// card JSON 2.0, in English (en) and Chinese (zh), from files embedded in the binary.
//
// Guarantees:
//   - Every template exists in every language; New fails otherwise, so a missing translation
//     is a build-time test failure, not a blank message in production.
//   - User text cannot break a card: card templates put every value through the json func,
//     which writes a quoted, escaped JSON string. A rendered card is checked with json.Valid,
//     must declare "schema":"2.0", is compacted, and is refused (ErrTooLarge) over 30 KB;
//     Render then falls back to the text template of the same name.
//   - No markup but LoopX's: only the at, cardAt and cardAts funcs make a mention, and
//     nothing makes a link. After a template ran, every Lark tag (<at>, <font>, <link>, ...),
//     markdown link or image and character reference in the output is made inert (SafeText:
//     ‹ for <, full-width brackets, ＆), in texts and in every string a card shows; the
//     mentions the funcs wrote are restored from placeholders only the set can write. A
//     card's callback values are left as they are. Text sent without a template (an agent's
//     inbox reply) goes through SafeText.
//   - Rendering is deterministic: the same data gives the same bytes (golden tests pin them).
//   - A text LoopX stored in one language from a word (a stall gate's question) can be said
//     again in another (Set.Reword), its arguments read back by the word's form; a text no
//     word made comes back as it is.
//
// Adding a template (digests, reminders, ...):
//
//  1. Write templates/en/<name>.txt.tmpl and/or templates/en/<name>.card.tmpl, and the same
//     files under templates/zh/. A card should come with a .txt.tmpl fallback of the same name.
//     Cards start with {"schema":"2.0","config":{"update_multi":true}, ... }; wrap every value
//     in {{json .Field}} and prefer "plain_text" elements for text that people or agents wrote.
//  2. Add sample data as templates/testdata/data/<name>.json (the fields your caller passes;
//     data is a struct or map, field names as in the template).
//  3. Run `go test ./templates -run TestGolden -update` and review the files written under
//     templates/testdata/golden/<lang>/.
//  4. Call Set.Render(lang, "<name>", data) (card with text fallback), Set.Card or Set.Text.
//
// Funcs available in templates: json, plain (kept for readability: every output is made safe
// as a whole), at (a text-message mention), cardAt / cardAts (card markdown mentions; never of
// everyone), join, add, trunc.
package templates
