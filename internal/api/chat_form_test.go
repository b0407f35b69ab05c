package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/jobwait"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/store/storetest"
)

// The chat form over real HTTP (docs/design.md §12, docs/api.md): POST
// /v1/jobs and batch lines in the OpenAI chat-completions form, checked
// against a catalog of models (built here field by field: an openai and
// an anthropic provider, priced models with their own output bounds),
// reserved at the model's worst case; and POST /v1/chat/completions,
// answered from a job the test ends through the store itself.

// chatEnv is a real api.Server over a real store on a SQLite file, with
// cfg's Catalog, WorstCase, Waits and SyncWait.
func chatEnv(t *testing.T, cfg api.Config) *env {
	t.Helper()
	e := &env{t: t}
	e.st = storetest.MustOpen(t, storetest.SQLitePath(t), store.Options{})
	cfg.Store, cfg.Logger, cfg.OnAccepted = e.st, storetest.TestLogger(t), func() { e.accepted.Add(1) }
	e.api = api.New(cfg)
	e.api.SetReady(true)
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e
}

// Models of testCatalog.
var (
	gptMini = inkwell.Model{Name: "gpt-mini", Provider: "oai", Upstream: "gpt-4o-mini-2024-07-18",
		InputMicrosPerMTok: 150_000, OutputMicrosPerMTok: 600_000, MaxOutputTokens: 1000}
	claude = inkwell.Model{Name: "claude", Provider: "anth", Upstream: "claude-3-5-haiku-latest",
		InputMicrosPerMTok: 800_000, OutputMicrosPerMTok: 4_000_000, MaxOutputTokens: 500}
)

// testCatalog is what a config file with an openai provider serving
// gpt-mini and an anthropic one serving claude reads as.
func testCatalog() *catalog.Catalog {
	return &catalog.Catalog{
		Providers: []catalog.Provider{
			{Name: "oai", Kind: catalog.KindOpenAI, URL: "http://127.0.0.1:1", Timeout: time.Minute},
			{Name: "anth", Kind: catalog.KindAnthropic, URL: "http://127.0.0.1:2", Timeout: time.Minute},
		},
		Models:  []inkwell.Model{gptMini, claude},
		Default: "gpt-mini",
	}
}

// catalogEnv serves testCatalog, reserving what serve reserves
// (provider.WorstCaseMicros; for a priced model, Model.WorstCase).
func catalogEnv(t *testing.T) *env {
	t.Helper()
	return chatEnv(t, api.Config{Catalog: testCatalog(),
		WorstCase: func(w inkwell.Work, m inkwell.Model) int64 { return provider.WorstCaseMicros(nil, m, w) }})
}

func (e *env) storedJob(id int64) inkwell.Job {
	e.t.Helper()
	d, err := e.st.Show(e.t.Context(), id)
	if err != nil {
		e.t.Fatalf("Show %d: %v", id, err)
	}
	return d.Job
}

const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Answer in one line."},{"role":"user","content":"a haiku about ink"}],"temperature":0.7,"max_completion_tokens":200,"metadata":{"ticket":"T-1"}}`

func TestChatForm_AcceptStoresThePayload(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	r := e.post("chat-1", chatBody)
	if r.status != http.StatusCreated {
		t.Fatalf("POST chat form: %d %s; want 201", r.status, r.body)
	}
	id := r.detail(t).Job.ID
	const want = `{"account":"default","max_completion_tokens":200,"messages":[{"role":"system","content":"Answer in one line."},{"role":"user","content":"a haiku about ink"}],"metadata":{"ticket":"T-1"},"model":"gpt-4o-mini","temperature":0.7}`
	job := e.storedJob(id)
	if string(job.Payload) != want {
		t.Errorf("stored payload %s\nwant           %s", job.Payload, want)
	}
	if job.RequestHash != inkwell.RequestHash([]byte(want)) || job.Account != inkwell.DefaultAccount || job.Status != inkwell.StatusQueued {
		t.Errorf("job %+v, want the payload's hash, account default, queued", job)
	}

	// The same body re-sent, and the same body with its members in another
	// order and other spacing, are the same request: 200, the same job.
	// (Members of nested objects keep their order: a json_schema's
	// properties are written in the order given.)
	reordered := "{ \"metadata\": {\"ticket\": \"T-1\"}, \"max_completion_tokens\": 200, \"temperature\": 0.7,\n" +
		" \"messages\": [{\"role\": \"system\", \"content\": \"Answer in one line.\"}, {\"role\": \"user\", \"content\": \"a haiku about ink\"}], \"model\": \"gpt-4o-mini\" }"
	before := e.contents()
	for _, body := range []string{chatBody, reordered} {
		r := e.post("chat-1", body)
		if r.status != http.StatusOK || r.detail(t).Job.ID != id {
			t.Errorf("re-send %s: %d %s; want 200 with job %d", body, r.status, r.body, id)
		}
	}
	e.assertUnchanged(before)

	// Another temperature (or other metadata, or none) under the same key
	// is another request.
	for _, body := range []string{
		strings.Replace(chatBody, `"temperature":0.7`, `"temperature":0.8`, 1),
		strings.Replace(chatBody, `"metadata":{"ticket":"T-1"}`, `"metadata":{"ticket":"T-2"}`, 1),
		strings.Replace(chatBody, `,"metadata":{"ticket":"T-1"}`, ``, 1),
	} {
		assertError(t, e.post("chat-1", body), http.StatusUnprocessableEntity, inkwell.EKEYREUSED)
	}
	e.assertUnchanged(before)
}

// TestChatForm_ShortFormHashesAsBefore: the short form is stored exactly as
// before the chat form existed, so a re-send of a job stored then is
// answered, not refused as another request.
func TestChatForm_ShortFormHashesAsBefore(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	for _, tc := range []struct{ key, body, want string }{
		{"s1", `{"prompt":"x"}`, `{"prompt":"x","account":"default","max_words":50}`},
		{"s2", `{"max_words":7,"account":"acme","prompt":"a poem"}`, `{"prompt":"a poem","account":"acme","max_words":7}`},
		{"s3", `{"prompt":"p","model":"gpt-4o-mini"}`, `{"prompt":"p","account":"default","max_words":50,"model":"gpt-4o-mini"}`},
	} {
		r := e.post(tc.key, tc.body)
		if r.status != http.StatusCreated {
			t.Errorf("POST %s: %d %s; want 201", tc.body, r.status, r.body)
			continue
		}
		job := e.storedJob(r.detail(t).Job.ID)
		if string(job.Payload) != tc.want || job.RequestHash != inkwell.RequestHash([]byte(tc.want)) {
			t.Errorf("POST %s stored %s (hash %s), want %s (hash %s)", tc.body, job.Payload, job.RequestHash, tc.want, inkwell.RequestHash([]byte(tc.want)))
		}
	}
	// A job stored by hand as an older version stored it is found by its key.
	const old = `{"prompt":"from before","account":"default","max_words":50}`
	if _, _, err := e.st.Accept(t.Context(), store.AcceptParams{Account: "default", IdempotencyKey: "old", RequestHash: inkwell.RequestHash([]byte(old)), Payload: []byte(old)}); err != nil {
		t.Fatal(err)
	}
	if r := e.post("old", `{"prompt":"from before"}`); r.status != http.StatusOK {
		t.Errorf("re-send of a short-form job stored before: %d %s; want 200", r.status, r.body)
	}
}

func TestChatForm_RefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, store.Options{})
	if r := e.post("existing", chatBody); r.status != http.StatusCreated {
		t.Fatalf("setup POST: %d %s", r.status, r.body)
	}
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	manyKeys := map[string]string{}
	for i := range 17 {
		manyKeys[fmt.Sprintf("k%d", i)] = "v"
	}
	many, _ := json.Marshal(manyKeys)
	for _, tc := range []struct{ name, body, says string }{
		{"N2", `{"n":2,` + msgs + `}`, "n must be 1"},
		{"StreamTrue", `{"stream":true,` + msgs + `}`, "stream must be false"},
		{"PromptAndMessages", `{"prompt":"x",` + msgs + `}`, "not both"},
		{"EmptyMessages", `{"messages":[]}`, "messages"},
		{"BadRole", `{"messages":[{"role":"robot","content":"hi"}]}`, "messages[0].role"},
		{"Temperature3", `{"temperature":3,` + msgs + `}`, "temperature"},
		{"MetadataNotObject", `{"metadata":"x",` + msgs + `}`, "metadata"},
		{"MetadataNumberValue", `{"metadata":{"a":1},` + msgs + `}`, "metadata"},
		{"Metadata17Keys", `{"metadata":` + string(many) + `,` + msgs + `}`, "metadata"},
		{"MetadataLongKey", `{"metadata":{"` + strings.Repeat("k", 65) + `":"v"},` + msgs + `}`, "metadata"},
		{"MetadataLongValue", `{"metadata":{"k":"` + strings.Repeat("v", 513) + `"},` + msgs + `}`, "metadata"},
		{"AccountNotString", `{"account":7,` + msgs + `}`, "account"},
		{"AccountBadName", `{"account":"no spaces",` + msgs + `}`, "account"},
		{"DuplicateMember", `{"temperature":1,"Temperature":2,` + msgs + `}`, "emperature"},
		// Inside a message or a part too: the provider is sent them as
		// written, and may read the other one.
		{"PartTypeInAnotherCase", `{"messages":[{"role":"user","content":[{"type":"file","Type":"text","file":{"file_id":"file-abc"}}]}]}`, `messages[0].content part 0 names field "Type" twice`},
		{"MessageContentInAnotherCase", `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}],"Content":"x"}]}`, `messages[0] names field "Content" twice`},
		// A known name in another case, alone: read by its exact name it
		// would go to the provider unchecked, and a provider matching
		// names without case would obey it.
		{"MaxTokensInAnotherCase", `{"Max_Tokens":999999,` + msgs + `}`, `field "Max_Tokens" is "max_tokens" in another case`},
		{"ServiceTierInAnotherCase", `{"SERVICE_TIER":"priority",` + msgs + `}`, `field "SERVICE_TIER" is "service_tier" in another case`},
		{"AccountInAnotherCase", `{"Account":"someone-else",` + msgs + `}`, `field "Account" is "account" in another case`},
		{"MessageRoleTwice", `{"messages":[{"role":"user","content":"hi"},{"role":"system","content":"hi","role":"user"}]}`, `messages[1] names field "role" twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.contents()
			got := assertError(t, e.post("k-"+tc.name, tc.body), http.StatusBadRequest, inkwell.EINVALID)
			if !strings.Contains(got.Message, tc.says) {
				t.Errorf("message %q does not say %q", got.Message, tc.says)
			}
			e.assertUnchanged(before)
		})
	}
}

func TestChatForm_Catalog(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ name, body, says string }{
		{"UnknownModel", `{"model":"gpt-5-turbo",` + msgs + `}`, `model "gpt-5-turbo" is not served here; known models: gpt-mini, claude`},
		{"UnknownFieldOnAnthropic", `{"model":"claude","logprobs":true,` + msgs + `}`, `field "logprobs"`},
		{"FirstUnknownFieldSorted", `{"model":"claude","zeta":1,"beta":2,` + msgs + `}`, `field "beta"`},
		{"MaxTokensOverTheModel", `{"model":"gpt-mini","max_tokens":1001,` + msgs + `}`, "1001"},
		{"MaxCompletionTokensOverTheModel", `{"model":"claude","max_completion_tokens":501,` + msgs + `}`, "501"},
		{"DefaultModelBound", `{"max_tokens":1001,` + msgs + `}`, `"gpt-mini"`},
		{"LimitsDisagreeUnderTheModel", `{"model":"gpt-mini","max_tokens":5000,"max_completion_tokens":10,` + msgs + `}`, "max_tokens (5000) and max_completion_tokens (10) disagree"},
		{"SeedOnAnthropic", `{"model":"claude","seed":1,` + msgs + `}`, `"seed"`},
		{"HotTemperatureOnAnthropic", `{"model":"claude","temperature":1.5,` + msgs + `}`, "temperature 1.5"},
		{"JSONOnAnthropic", `{"model":"claude","response_format":{"type":"json_object"},` + msgs + `}`, "json_object"},
		{"PriorityTierOnAPricedModel", `{"model":"gpt-mini","service_tier":"priority",` + msgs + `}`, `service_tier "priority" cannot be sent to model "gpt-mini"`},
		{"TierNotAString", `{"model":"gpt-mini","service_tier":{"a":1},` + msgs + `}`, "service_tier must be a string"},
		{"WebSearchOnAPricedModel", `{"model":"gpt-mini","web_search_options":{},` + msgs + `}`, `web_search_options cannot be sent to model "gpt-mini"`},
		{"FilePartOnAnthropic", `{"model":"claude","messages":[{"role":"user","content":[{"type":"text","text":"sum it up"},{"type":"file","file":{"file_id":"file-abc"}}]}]}`, `a content part of type "file" cannot be carried to model "claude"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.contents()
			got := assertError(t, e.post("k-"+tc.name, tc.body), http.StatusBadRequest, inkwell.EINVALID)
			if !strings.Contains(got.Message, tc.says) {
				t.Errorf("message %q does not say %q", got.Message, tc.says)
			}
			e.assertUnchanged(before)
		})
	}
	for _, tc := range []struct{ name, body string }{
		{"UnknownFieldOnOpenAI", `{"model":"gpt-mini","logprobs":true,"user":"u-1",` + msgs + `}`},
		{"AtTheModelsBound", `{"model":"gpt-mini","max_tokens":1000,` + msgs + `}`},
		{"AnthropicWithinItsLimits", `{"model":"claude","temperature":1,"max_tokens":500,"response_format":{"type":"text"},` + msgs + `}`},
		{"DefaultModel", `{` + msgs + `}`},
		{"SeedOnOpenAI", `{"model":"gpt-mini","seed":1,"temperature":2,` + msgs + `}`},
		{"AnthropicTextAndImageParts", `{"model":"claude","messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`},
		{"FlexTierOnAPricedModel", `{"model":"gpt-mini","service_tier":"flex","web_search_options":null,` + msgs + `}`},
		{"FilePartOnOpenAI", `{"model":"gpt-mini","messages":[{"role":"user","content":[{"type":"text","text":"sum it up"},{"type":"file","file":{"file_id":"file-abc"}}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post("k-"+tc.name, tc.body)
			if r.status != http.StatusCreated {
				t.Fatalf("POST %s: %d %s; want 201", tc.body, r.status, r.body)
			}
			// The unknown members are stored, to be sent on unchanged.
			var payload map[string]json.RawMessage
			if err := json.Unmarshal(e.storedJob(r.detail(t).Job.ID).Payload, &payload); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(tc.body, "logprobs") && (string(payload["logprobs"]) != "true" || string(payload["user"]) != `"u-1"`) {
				t.Errorf("stored payload %v lost the unknown members", payload)
			}
		})
	}
}

// acmeBody is a chat request on gpt-mini whose worst case is 73 micros:
// its members but account as JSON are 82 bytes (2 + model 5+10+4 +
// messages 8+32+4 + max_tokens 10+3+4), so ceil((82 × 150,000 + 100 ×
// 600,000) / 10^6) = ceil(72.3).
const acmeBody = `{"model":"gpt-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"account":"%s"}`

func TestChatForm_ReservesTheModelsWorstCase(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	body := fmt.Sprintf(acmeBody, "acme")
	c := parseChatBody(t, body)
	const worst = 73
	if got := gptMini.WorstCase(c); got != worst {
		t.Fatalf("gpt-mini's WorstCase = %d, want %d (the test's own figure)", got, worst)
	}
	exact, less := int64(worst), int64(worst-1)
	e.mustAccount("acme", &exact, 0)
	e.mustAccount("tight", &less, 0)
	if r := e.post("b1", body); r.status != http.StatusCreated {
		t.Fatalf("a budget of exactly the worst case: %d %s; want 201", r.status, r.body)
	}
	a, err := e.st.Account(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if a.ReservedMicros != worst || a.SpentMicros != 0 {
		t.Errorf("acme reserved %d spent %d, want %d reserved and nothing spent", a.ReservedMicros, a.SpentMicros, worst)
	}
	before := e.contents()
	assertError(t, e.post("b2", fmt.Sprintf(acmeBody, "tight")), http.StatusPaymentRequired, inkwell.EBUDGET)
	assertError(t, e.post("b3", body), http.StatusPaymentRequired, inkwell.EBUDGET) // acme's budget is all reserved
	e.assertUnchanged(before)
	if r := e.post("b1", body); r.status != http.StatusOK {
		t.Errorf("re-send past the budget: %d %s; want 200", r.status, r.body)
	}
	e.assertUnchanged(before)
}

// parseChatBody is the chat request of a job body, its "account"
// (Inkwell's own field, not the provider's) left out.
func parseChatBody(t *testing.T, body string) inkwell.ChatRequest {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatal(err)
	}
	delete(fields, "account")
	c, err := inkwell.ParseChat(fields)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestChatForm_ReservesEachImage: a request with an image part reserves
// the model's max_image_tokens for it beside its bytes (an image a URL
// names is a few bytes and a thousand tokens or more of input), so a
// budget that holds the bytes but not the image refuses it, 402, nothing
// written; the same request without the image fits.
func TestChatForm_ReservesEachImage(t *testing.T) {
	t.Parallel()
	cat := testCatalog()
	cat.Models[0].ImageTokens = 1445 // gpt-mini
	e := chatEnv(t, api.Config{Catalog: cat,
		WorstCase: func(w inkwell.Work, m inkwell.Model) int64 { return provider.WorstCaseMicros(nil, m, w) }})
	const withImage = `{"model":"gpt-mini","max_tokens":100,"account":"acme","messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`
	const textOnly = `{"model":"gpt-mini","max_tokens":100,"account":"acme","messages":[{"role":"user","content":[{"type":"text","text":"what is it?"}]}]}`
	m := cat.Models[0]
	image, text := parseChatBody(t, withImage), parseChatBody(t, textOnly)
	worst := m.Cost(int64(image.InputBytes())+1445, 100)
	if got := m.WorstCase(image); got != worst || got <= m.WorstCase(text) {
		t.Fatalf("WorstCase with the image = %d, want %d (bytes %d + 1,445 tokens), above the text's %d", got, worst, image.InputBytes(), m.WorstCase(text))
	}
	budget := m.Cost(int64(image.InputBytes()), 100) // the image's bytes, not its tokens
	e.mustAccount("acme", &budget, 0)
	before := e.contents()
	assertError(t, e.post("img-1", withImage), http.StatusPaymentRequired, inkwell.EBUDGET)
	e.assertUnchanged(before)
	if r := e.post("text-1", textOnly); r.status != http.StatusCreated {
		t.Fatalf("the same request without its image: %d %s; want 201", r.status, r.body)
	}
	a, err := e.st.Account(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if want := m.WorstCase(text); a.ReservedMicros != want {
		t.Errorf("acme reserved %d, want the text request's worst case %d", a.ReservedMicros, want)
	}
}

// TestChatForm_ContextWindowBoundsWhatBytesCannot: on a model with
// max_input_tokens (its context window), a request with a part its bytes
// do not size (a file the provider stores) reserves the whole window, so
// a budget that holds its bytes but not the window refuses it, 402,
// nothing written; and a request of many images reserves the window, not
// images × max_image_tokens past it, so a budget of one window takes it.
func TestChatForm_ContextWindowBoundsWhatBytesCannot(t *testing.T) {
	t.Parallel()
	cat := testCatalog()
	cat.Models[0].ImageTokens = 1445 // gpt-mini
	cat.Models[0].InputTokens = 4000
	m := cat.Models[0]
	e := chatEnv(t, api.Config{Catalog: cat,
		WorstCase: func(w inkwell.Work, m inkwell.Model) int64 { return provider.WorstCaseMicros(nil, m, w) }})
	const withFile = `{"model":"gpt-mini","max_tokens":100,"account":"acme","messages":[{"role":"user","content":[{"type":"text","text":"sum it up"},{"type":"file","file":{"file_id":"file-abc"}}]}]}`
	img := `{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}`
	tenImages := `{"model":"gpt-mini","max_tokens":100,"account":"acme","messages":[{"role":"user","content":[` + strings.Repeat(img+",", 9) + img + `]}]}`
	file, images := parseChatBody(t, withFile), parseChatBody(t, tenImages)
	window := m.Cost(4000, 100)
	if got := m.WorstCase(file); got != window {
		t.Fatalf("WorstCase with a file part = %d, want the window's %d", got, window)
	}
	if got, uncapped := m.WorstCase(images), m.Cost(int64(images.InputBytes())+10*1445, 100); got != window || uncapped <= window {
		t.Fatalf("WorstCase of ten images = %d, want the window's %d (below the uncapped %d)", got, window, uncapped)
	}
	// One window, and room for the file's bytes but not a second window:
	// counted by its bytes the file would fit.
	bytesOnly := m.Cost(int64(file.InputBytes()), 100)
	budget := window + bytesOnly
	if bytesOnly >= window || m.WorstCase(images) >= m.Cost(int64(images.InputBytes())+10*1445, 100) {
		t.Fatalf("the test's sizes do not separate the bounds")
	}
	e.mustAccount("acme", &budget, 0)
	if r := e.post("images", tenImages); r.status != http.StatusCreated {
		t.Fatalf("ten images within one window's budget: %d %s; want 201", r.status, r.body)
	}
	before := e.contents()
	assertError(t, e.post("file", withFile), http.StatusPaymentRequired, inkwell.EBUDGET)
	e.assertUnchanged(before)
	a, err := e.st.Account(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if a.ReservedMicros != window {
		t.Errorf("acme reserved %d, want one window's %d", a.ReservedMicros, window)
	}
}

// TestChatForm_HugeMaxTokensCannotOverflowTheReservation: serve without a
// config file (catalog.Single: one openai provider answering any model,
// unpriced, no bound on max_tokens) reserves the output bound at the
// word price. A max_tokens whose product with that price passes 2^63
// must still be refused by the budget, never wrap to a negative
// reservation that frees room in it.
func TestChatForm_HugeMaxTokensCannotOverflowTheReservation(t *testing.T) {
	t.Parallel()
	prov, err := provider.NewOpenAI(provider.OpenAIConfig{URL: "http://127.0.0.1:1", Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.Single(catalog.Provider{Kind: catalog.KindOpenAI}, "gpt-4o-mini", inkwell.MaxMaxWords*inkwell.TokensPerWord)
	e := chatEnv(t, api.Config{Catalog: cat,
		WorstCase: func(w inkwell.Work, m inkwell.Model) int64 { return provider.WorstCaseMicros(prov, m, w) }})
	budget := int64(1_000_000)
	e.mustAccount("acme", &budget, 0)
	before := e.contents()
	// 9,223,372,036,854,776 × 1,000 micros a word is 193 more than 2^63-1.
	r := e.post("huge", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":9223372036854776,"account":"acme"}`)
	if r.status != http.StatusPaymentRequired && r.status != http.StatusBadRequest {
		a, _ := e.st.Account(t.Context(), "acme")
		t.Errorf("max_tokens 9223372036854776 on a budget of 1 unit: %d %s; want 402 (or 400), nothing written. Account now reserves %d", r.status, r.body, a.ReservedMicros)
	}
	e.assertUnchanged(before)

	// A batch's lines are reserved as one sum. Three lines whose worst
	// cases are each inside int64 (about 6.1 × 10^18 micros, 1,000 a
	// token) sum past 2^63 and wrap around to 384 micros, well inside the
	// budget: 1,000 × (6,148,914,691,236,517 × 2 + 6,148,914,691,236,518)
	// = 2^64 + 384.
	line := func(id string, maxTokens int64) string {
		return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"account":"acme"}}`, id, maxTokens) + "\n"
	}
	r = e.do(http.MethodPost, "/v1/batches", map[string]string{"Idempotency-Key": "huge-batch", "Content-Type": "application/jsonl"},
		[]byte(line("a", 6148914691236517)+line("b", 6148914691236517)+line("c", 6148914691236518)))
	if r.status != http.StatusPaymentRequired && r.status != http.StatusBadRequest {
		a, _ := e.st.Account(t.Context(), "acme")
		t.Errorf("a batch whose lines' worst cases wrap around 2^64: %d %s; want 402 (or 400), nothing written. Account now reserves %d of its %d", r.status, r.body, a.ReservedMicros, budget)
	}
	e.assertUnchanged(before)
}

func TestChatForm_BatchLines(t *testing.T) {
	t.Parallel()
	e := catalogEnv(t)
	batch := func(key, body string) reply {
		return e.do(http.MethodPost, "/v1/batches", map[string]string{"Idempotency-Key": key, "Content-Type": "application/jsonl"}, []byte(body))
	}
	line := func(id, url, body string) string {
		return fmt.Sprintf(`{"custom_id":%q,"method":"POST","url":%q,"body":%s}`, id, url, body) + "\n"
	}
	const chat = `{"model":"claude","messages":[{"role":"user","content":"hi %s"}],"max_tokens":20}`
	ok := line("a", "/v1/chat/completions", fmt.Sprintf(chat, "a")) +
		line("b", "/v1/chat/completions", `{"messages":[{"role":"user","content":"on the default"}]}`) +
		line("c", "/v1/jobs", `{"prompt":"the short form"}`)
	r := batch("batch-1", ok)
	if r.status != http.StatusCreated {
		t.Fatalf("batch of chat lines: %d %s; want 201", r.status, r.body)
	}
	var b api.BatchResponse
	if err := json.Unmarshal(r.body, &b); err != nil || b.Lines != 3 {
		t.Fatalf("batch answer %s (%v), want 3 lines", r.body, err)
	}
	var payloads []string
	rows, err := e.st.DB().QueryContext(t.Context(), `SELECT payload FROM jobs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, p)
	}
	rows.Close()
	want := []string{
		`{"account":"default","max_tokens":20,"messages":[{"role":"user","content":"hi a"}],"model":"claude"}`,
		`{"account":"default","messages":[{"role":"user","content":"on the default"}]}`,
		`{"prompt":"the short form","account":"default","max_words":50}`,
	}
	if !slices.Equal(payloads, want) {
		t.Errorf("stored payloads\n%q\nwant\n%q", payloads, want)
	}

	before := e.contents()
	for _, tc := range []struct{ name, body, says string }{
		{"UnknownModel", line("a", "/v1/chat/completions", fmt.Sprintf(chat, "a")) +
			line("b", "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`),
			`line 2: model "nope" is not served here; known models: gpt-mini, claude`},
		{"UnknownFieldOnAnthropic", "\n" + line("x", "/v1/chat/completions", `{"model":"claude","logprobs":true,"messages":[{"role":"user","content":"hi"}]}`),
			`line 2: field "logprobs"`},
		{"N2", line("x", "/v1/chat/completions", `{"n":2,"messages":[{"role":"user","content":"hi"}]}`), "line 1: body: n must be 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := assertError(t, batch("batch-"+tc.name, tc.body), http.StatusBadRequest, inkwell.EINVALID)
			if !strings.HasPrefix(got.Message, tc.says) {
				t.Errorf("message %q does not start %q", got.Message, tc.says)
			}
			e.assertUnchanged(before)
		})
	}
}

// chatCompletion is POST /v1/chat/completions, with key (none when "").
func (e *env) chatCompletion(key, body string) reply {
	e.t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return e.do(http.MethodPost, "/v1/chat/completions", h, []byte(body))
}

func jobIDHeader(t *testing.T, r reply) int64 {
	t.Helper()
	id, err := strconv.ParseInt(r.header.Get("Inkwell-Job-Id"), 10, 64)
	if err != nil {
		t.Fatalf("Inkwell-Job-Id %q (status %d, body %s): %v", r.header.Get("Inkwell-Job-Id"), r.status, r.body, err)
	}
	return id
}

// openAIError is the OpenAI error form POST /v1/chat/completions answers
// a failed or pending job with.
func openAIError(t *testing.T, r reply) (code, typ, message string) {
	t.Helper()
	var e struct {
		Error struct {
			Code, Type, Message string
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("status %d body %s is not an error: %v", r.status, r.body, err)
	}
	return e.Error.Code, e.Error.Type, e.Error.Message
}

const completion = `{"id":"chatcmpl-42","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"Ink settles slowly"},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":17,"total_tokens":38}}`

// completeJob claims job id as a lane and completes it with the
// completion above.
func completeJob(t *testing.T, st *store.Store, id int64) {
	t.Helper()
	c := storetest.ClaimAs(t, st, "lane-a")
	if c == nil || c.Job.ID != id {
		t.Fatalf("claimed %+v, want job %d", c, id)
	}
	if err := st.CompleteIfRunning(t.Context(), store.CompleteParams{JobID: id, AttemptID: c.Attempt.ID, Text: "Ink settles slowly",
		Account: inkwell.DefaultAccount, AmountMicros: 14, ProviderRequestID: "chatcmpl-42", Model: "gpt-4o-mini",
		Response: []byte(completion), FinishReason: "stop", PromptTokens: 21, CompletionTokens: 17, Usage: true}); err != nil {
		t.Fatal(err)
	}
}

const syncBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a haiku about ink"}]}`

// TestChatCompletions_AnswersTheDoneJob: a job done when the request comes
// (stored by POST /v1/jobs under the same key) is answered at once with
// its chat.completion object, as the provider gave it.
func TestChatCompletions_AnswersTheDoneJob(t *testing.T) {
	t.Parallel()
	e := chatEnv(t, api.Config{SyncWait: time.Minute})
	r := e.post("sync-1", syncBody)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /v1/jobs: %d %s", r.status, r.body)
	}
	id := r.detail(t).Job.ID
	completeJob(t, e.st, id)
	before := e.contents()
	r = e.chatCompletion("sync-1", syncBody)
	if r.status != http.StatusOK || string(r.body) != completion {
		t.Errorf("POST /v1/chat/completions: %d %s\nwant 200 %s", r.status, r.body, completion)
	}
	if got := jobIDHeader(t, r); got != id {
		t.Errorf("Inkwell-Job-Id %d, want %d", got, id)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	e.assertUnchanged(before)
	// The same key with another body is refused, as on POST /v1/jobs.
	assertError(t, e.chatCompletion("sync-1", strings.Replace(syncBody, "ink", "paper", 1)), http.StatusUnprocessableEntity, inkwell.EKEYREUSED)
}

// TestChatCompletions_WaitsForTheJob: the request stores its job and waits;
// once the job is done (and the hub woken, as the lane wakes it), the
// waiting request answers its completion.
func TestChatCompletions_WaitsForTheJob(t *testing.T) {
	t.Parallel()
	hub := jobwait.New()
	e := chatEnv(t, api.Config{Waits: hub, SyncWait: 5 * time.Minute})
	answered := make(chan reply, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // before the server closes (cleanups run last first): a failed test leaves no request waiting
	go func() {
		h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": "wait-1"}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(syncBody))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			answered <- reply{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		buf, _ := io.ReadAll(resp.Body)
		answered <- reply{status: resp.StatusCode, header: resp.Header, body: buf}
	}()
	storetest.WaitFor(t, 30*time.Second, "the request waiting on its job", func() bool { return slices.Contains(hub.IDs(), 1) })
	completeJob(t, e.st, 1)
	hub.Wake(1)
	select {
	case r := <-answered:
		if r.status != http.StatusOK || string(r.body) != completion {
			t.Errorf("POST /v1/chat/completions: %d %s\nwant 200 %s", r.status, r.body, completion)
		}
		if got := jobIDHeader(t, r); got != 1 {
			t.Errorf("Inkwell-Job-Id %d, want 1", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer within 30s of the job's end")
	}
}

func TestChatCompletions_FailedJob(t *testing.T) {
	t.Parallel()
	e := chatEnv(t, api.Config{SyncWait: time.Minute})
	id := e.post("fail-1", syncBody).detail(t).Job.ID
	c := storetest.ClaimAs(t, e.st, "lane-a")
	if err := e.st.FailIfRunning(t.Context(), store.FailParams{JobID: id, AttemptID: c.Attempt.ID,
		Error: "provider: provider call: client error: 400 unknown parameter", Class: inkwell.ClassRejected}); err != nil {
		t.Fatal(err)
	}
	r := e.chatCompletion("fail-1", syncBody)
	if r.status != http.StatusBadRequest {
		t.Errorf("a rejected job: status %d, want 400 (%s)", r.status, r.body)
	}
	code, typ, msg := openAIError(t, r)
	if code != "rejected" || typ != "inkwell_job_failed" || !strings.Contains(msg, "unknown parameter") {
		t.Errorf("error %q %q %q, want code rejected, type inkwell_job_failed, the job's error", code, typ, msg)
	}
	if got := jobIDHeader(t, r); got != id {
		t.Errorf("Inkwell-Job-Id %d, want %d", got, id)
	}
}

func TestChatCompletions_StillQueued(t *testing.T) {
	t.Parallel()
	e := chatEnv(t, api.Config{SyncWait: 50 * time.Millisecond})
	r := e.chatCompletion("queued-1", syncBody)
	if r.status != http.StatusGatewayTimeout {
		t.Errorf("a queued job: status %d, want 504 (%s)", r.status, r.body)
	}
	if code, typ, _ := openAIError(t, r); code != "still_queued" || typ != "inkwell_job_pending" {
		t.Errorf("error code %q type %q, want still_queued, inkwell_job_pending", code, typ)
	}
	id := jobIDHeader(t, r)
	if job := e.storedJob(id); job.Status != inkwell.StatusQueued || job.IdempotencyKey != "queued-1" {
		t.Errorf("job %+v, want queued under key queued-1", job)
	}
	// The same request with the same key waits on the same job.
	if r := e.chatCompletion("queued-1", syncBody); r.status != http.StatusGatewayTimeout || jobIDHeader(t, r) != id {
		t.Errorf("re-send: %d, job %s; want 504 on job %d", r.status, r.header.Get("Inkwell-Job-Id"), id)
	}
}

func TestChatCompletions_WithoutKeyEachRequestIsAJob(t *testing.T) {
	t.Parallel()
	e := chatEnv(t, api.Config{SyncWait: 50 * time.Millisecond})
	var ids []int64
	var keys []string
	for range 2 {
		r := e.chatCompletion("", syncBody)
		if r.status != http.StatusGatewayTimeout {
			t.Fatalf("status %d, want 504 still_queued (%s)", r.status, r.body)
		}
		id, key := jobIDHeader(t, r), r.header.Get("Idempotency-Key")
		if key == "" {
			t.Fatalf("no Idempotency-Key header in the answer to a request without one")
		}
		if job := e.storedJob(id); job.IdempotencyKey != key {
			t.Errorf("job %d stored under key %q, the answer says %q", id, job.IdempotencyKey, key)
		}
		ids, keys = append(ids, id), append(keys, key)
	}
	if ids[0] == ids[1] || keys[0] == keys[1] {
		t.Errorf("two requests without a key: jobs %v keys %q; want two jobs under two keys", ids, keys)
	}
	if n := e.counts()["jobs"]; n != 2 {
		t.Errorf("%d jobs stored, want 2", n)
	}
	// A request that sends a key gets no key made for it.
	r := e.chatCompletion("mine", syncBody)
	if got := r.header.Get("Idempotency-Key"); got != "" && got != "mine" {
		t.Errorf("Idempotency-Key %q in the answer to a request with key mine", got)
	}
	// A refused request (no messages) stores nothing, so it names no key:
	// a key there would invite a re-send that is a new job anyway.
	r = e.chatCompletion("", `{"model":"gpt-4o-mini"}`)
	if r.status != http.StatusBadRequest || r.header.Get("Idempotency-Key") != "" {
		t.Errorf("refused request: %d, Idempotency-Key %q; want 400 and no key", r.status, r.header.Get("Idempotency-Key"))
	}
}

// A job claimed while its chat completion waits is running when the wait
// runs out: the 504 says still_running, read again at the end of the
// wait. (A claim wakes no waiter, and the answer used to say still_queued
// of a job that had been running for most of the wait.)
func TestChatCompletions_StillRunningIsReadAtTheEnd(t *testing.T) {
	t.Parallel()
	e := chatEnv(t, api.Config{SyncWait: 2 * time.Second})
	done := make(chan reply, 1)
	go func() { done <- e.chatCompletion("running-1", syncBody) }()
	storetest.WaitFor(t, 5*time.Second, "the job stored", func() bool { return e.counts()["jobs"] == 1 })
	storetest.ClaimAs(t, e.st, "lane-a")
	r := <-done
	if r.status != http.StatusGatewayTimeout {
		t.Fatalf("status %d, want 504 (%s)", r.status, r.body)
	}
	if code, _, msg := openAIError(t, r); code != "still_running" || !strings.Contains(msg, "still running") {
		t.Errorf("error code %q (%s), want still_running: the job was claimed during the wait", code, msg)
	}
}
