package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/catalog"
	"github.com/inkwell/inkwell/internal/metrics/metricstest"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/worker"
)

// What the chat form costs against the short form, on the paths a client
// meets: the accept over HTTP, a 10,000-line batch, and the memory of a
// call in flight. The bodies are the ones below: today's short request, the
// same short form carrying 2 KiB of text, and a 2 KiB chat request.

// chatBodyBytes is the size of the chat request measured: a system
// message, a user message padded to make the body this long, temperature
// and max_completion_tokens.
const chatBodyBytes = 2048

var (
	shortBody = []byte(`{"prompt":"a haiku about ink","max_words":20}`)
	chatBody  = mustChatBody(chatBodyBytes)
	// shortBody2K is the short form carrying the chat body's user text:
	// what the chat form costs apart from the size of what it carries.
	shortBody2K = mustShortBody(chatUserText(chatBody))
)

const chatSystem = "You are a careful assistant for a small bookshop. Answer in plain English, in at most three short paragraphs."

// mustChatBody is a chat request of exactly size bytes.
func mustChatBody(size int) []byte {
	build := func(user string) []byte {
		type message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		b, err := json.Marshal(struct {
			Model               string    `json:"model"`
			Messages            []message `json:"messages"`
			Temperature         float64   `json:"temperature"`
			MaxCompletionTokens int       `json:"max_completion_tokens"`
		}{provider.DefaultModel, []message{{"system", chatSystem}, {"user", user}}, 0.7, 256})
		if err != nil {
			panic(err)
		}
		return b
	}
	const words = "Please write a short description of the fountain pen inks we sell, their colours and how quickly they dry. "
	empty := len(build(""))
	user := []byte(strings.Repeat(words, (size-empty)/len(words)+1)[:size-empty])
	user[len(user)-1] = '.' // no trailing space
	return build(string(user))
}

func chatUserText(body []byte) string {
	var c struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		panic(err)
	}
	return c.Messages[len(c.Messages)-1].Content
}

func mustShortBody(prompt string) []byte {
	b, err := json.Marshal(map[string]any{"prompt": prompt, "max_words": 128})
	if err != nil {
		panic(err)
	}
	return b
}

// serveAPI is the API as serve wires it without a config file: the flags'
// one sim provider answering any model (the catalog's check at accept) and
// its worst case reserved per job.
func serveAPI(st *store.Store, maxQueued int) *api.Server {
	return api.New(serveAPIConfig(st, maxQueued))
}

func serveAPIConfig(st *store.Store, maxQueued int) api.Config {
	sim := provider.NewSim(0)
	return api.Config{
		Store:     st,
		MaxQueued: maxQueued,
		Catalog:   catalog.Single(catalog.Provider{Kind: catalog.KindSim}, provider.DefaultModel, inkwell.MaxMaxWords*inkwell.TokensPerWord),
		WorstCase: func(w inkwell.Work, m inkwell.Model) int64 { return provider.WorstCaseMicros(sim, m, w) },
	}
}

// BenchmarkChatAcceptHTTP: the accept rate over real HTTP on SQLite
// (synchronous=FULL) of the 2 KiB chat request against today's short
// request, and against the short form carrying the same 2 KiB of text, with
// 1 and with 16 clients, each request its own key. Each form has its own
// database and server; the forms take turns in rounds of 200 requests (the
// order reversed each round), so a machine busy with other work slows each
// form alike and the ratio is measured in one run. b.N requests of each.
//
//	go test -run xxx -bench BenchmarkChatAcceptHTTP -benchtime 3000x -count 5 ./internal/bench
//
// Reported per form: accepts/s and the CPU this process spent per accept
// (client, server and SQLite all run in it); chat/short-% is the chat
// form's accept rate as a share of today's short request's.
func BenchmarkChatAcceptHTTP(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { chatAcceptPaired(b, clients) })
	}
}

// acceptSide is one form's server and its measured time.
type acceptSide struct {
	name    string
	body    []byte
	url     string
	client  *http.Client
	keys    atomic.Int64
	elapsed time.Duration
	cpu     time.Duration
	n       int
}

func newAcceptSide(b *testing.B, name string, body []byte) *acceptSide {
	st := mustStore(b, filepath.Join(b.TempDir(), name+".db"))
	srv := httptest.NewServer(serveAPI(st, 0))
	b.Cleanup(srv.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	return &acceptSide{name: name, body: body, url: srv.URL + "/v1/jobs", client: &http.Client{Transport: tr}}
}

func chatAcceptPaired(b *testing.B, clients int) {
	sides := []*acceptSide{newAcceptSide(b, "short", shortBody), newAcceptSide(b, "short2k", shortBody2K), newAcceptSide(b, "chat", chatBody)}
	for _, s := range sides { // warm-up: connections, statement cache
		s.run(b, clients, 100)
		s.elapsed, s.cpu, s.n = 0, 0, 0
	}
	const round = 200
	b.ResetTimer()
	for done, r := 0, 0; done < b.N; r++ {
		n := min(round, b.N-done)
		for i := range sides {
			if r%2 == 1 {
				i = len(sides) - 1 - i
			}
			sides[i].run(b, clients, n)
		}
		done += n
	}
	b.StopTimer()
	rate := map[string]float64{}
	for _, s := range sides {
		rate[s.name] = float64(s.n) / s.elapsed.Seconds()
		b.ReportMetric(rate[s.name], s.name+"-accepts/s")
		b.ReportMetric(float64(s.cpu.Microseconds())/float64(s.n), s.name+"-cpu-µs/accept")
	}
	b.ReportMetric(100*rate["chat"]/rate["short"], "chat/short-%")
	b.ReportMetric(100*rate["chat"]/rate["short2k"], "chat/short2k-%")
}

// run sends n requests of the side's form from clients goroutines and adds
// their wall time and this process's CPU time to the side's.
func (s *acceptSide) run(b *testing.B, clients, n int) {
	var next, errs atomic.Int64
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), processCPU()
	for range clients {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(s.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", s.name, s.keys.Add(1)))
				resp, err := s.client.Do(req)
				if err != nil || resp.StatusCode != http.StatusCreated {
					errs.Add(1)
				}
				if resp != nil {
					io.Copy(io.Discard, resp.Body) // drain, so the connection is reused
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	s.elapsed += time.Since(start)
	s.cpu += processCPU() - cpu0
	s.n += n
	if e := errs.Load(); e > 0 {
		b.Fatalf("%s: %d of %d requests failed", s.name, e, n)
	}
}

// BenchmarkChatAcceptOneForm: BenchmarkChatAcceptHTTP's accepts, one form
// per run, for a CPU profile of that form alone (the paired benchmark's
// profile mixes them). With the same -benchtime, a profile of the chat
// form less one of the short form is what the chat form adds:
//
//	go test -run xxx -bench 'ChatAcceptOneForm/form=short/clients=16' -benchtime 20000x -cpuprofile short.prof ./internal/bench
//	go test -run xxx -bench 'ChatAcceptOneForm/form=chat/clients=16' -benchtime 20000x -cpuprofile chat.prof ./internal/bench
//	go tool pprof -top -diff_base short.prof chat.prof
func BenchmarkChatAcceptOneForm(b *testing.B) {
	for _, form := range []struct {
		name string
		body []byte
	}{{"short", shortBody}, {"short2k", shortBody2K}, {"chat", chatBody}} {
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("form=%s/clients=%d", form.name, clients), func(b *testing.B) {
				s := newAcceptSide(b, form.name, form.body)
				s.run(b, clients, 100)
				s.elapsed, s.cpu, s.n = 0, 0, 0
				b.ResetTimer()
				s.run(b, clients, b.N)
				b.StopTimer()
				b.ReportMetric(float64(s.n)/s.elapsed.Seconds(), "accepts/s")
				b.ReportMetric(float64(s.cpu.Microseconds())/float64(s.n), "cpu-µs/accept")
			})
		}
	}
}

// BenchmarkChatBatchAccept10k: a batch of 10,000 lines over real HTTP to a
// fresh SQLite database (synchronous=FULL), as serve wires the API, timed
// from the first byte sent to the answer that says the batch is stored:
// every line read and checked, then 10,000 jobs and the batch row in one
// durable commit. The lines: today's short job request (url /v1/jobs),
// OpenAI's own example chat line (a system and a user message,
// max_tokens), and the 2 KiB chat request of BenchmarkChatAcceptHTTP. Two
// ways in: path=jsonl is one POST /v1/batches of the JSONL body;
// path=files is the OpenAI Files API, POST /v1/files (multipart,
// purpose=batch) then POST /v1/batches {input_file_id, endpoint,
// completion_window}, each step also timed alone. Target for the chat
// lines: under 1 s.
//
//	go test -run xxx -bench BenchmarkChatBatchAccept10k -benchtime 5x -count 3 ./internal/bench
func BenchmarkChatBatchAccept10k(b *testing.B) {
	const lines = 10_000
	for _, tc := range []struct {
		name, url string
		body      func(i int) string
	}{
		{"lines=jobs-short", "/v1/jobs", func(i int) string {
			return fmt.Sprintf(`{"prompt":"a haiku about ink, number %d","max_words":20}`, i)
		}},
		{"lines=chat-example", "/v1/chat/completions", func(i int) string {
			return fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello world! (%d)"}],"max_tokens":1000}`, i)
		}},
		{"lines=chat-2KiB", "/v1/chat/completions", func(int) string { return string(chatBody) }},
	} {
		var jsonl bytes.Buffer
		for i := 1; i <= lines; i++ {
			fmt.Fprintf(&jsonl, `{"custom_id":"request-%d","method":"POST","url":%q,"body":%s}`+"\n", i, tc.url, tc.body(i))
		}
		b.Run(tc.name+"/path=jsonl", func(b *testing.B) {
			chatBatchAccept(b, lines, func(url string, _ []byte) *http.Request {
				req, _ := http.NewRequest(http.MethodPost, url+"/v1/batches", bytes.NewReader(jsonl.Bytes()))
				req.Header.Set("Idempotency-Key", "bench-batch")
				req.Header.Set("Content-Type", "application/jsonl")
				return req
			})
			b.ReportMetric(float64(jsonl.Len())/(1<<20), "MiB/batch")
		})
		if tc.url != "/v1/chat/completions" {
			continue
		}
		b.Run(tc.name+"/path=files", func(b *testing.B) {
			chatBatchAccept(b, lines, uploadFile(b, jsonl.Bytes()), createFromFile(tc.url))
			b.ReportMetric(float64(jsonl.Len())/(1<<20), "MiB/batch")
		})
	}
}

// uploadFile is POST /v1/files of content as a batch input file.
func uploadFile(b *testing.B, content []byte) func(url string, _ []byte) *http.Request {
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	if err := mw.WriteField("purpose", "batch"); err != nil {
		b.Fatal(err)
	}
	fw, err := mw.CreateFormFile("file", "batch.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	fw.Write(content)
	if err := mw.Close(); err != nil {
		b.Fatal(err)
	}
	return func(url string, _ []byte) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/files", bytes.NewReader(form.Bytes()))
		req.Header.Set("Content-Type", mw.FormDataContentType())
		return req
	}
}

// createFromFile is POST /v1/batches of the file the previous answer names.
func createFromFile(endpoint string) func(url string, prev []byte) *http.Request {
	return func(url string, prev []byte) *http.Request {
		var file struct {
			ID string `json:"id"`
		}
		json.Unmarshal(prev, &file)
		body, _ := json.Marshal(map[string]string{"input_file_id": file.ID, "endpoint": endpoint, "completion_window": "24h"})
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/batches", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "bench-batch")
		return req
	}
}

// chatBatchAccept times, b.N times over, the requests steps make (each
// from the previous one's answer) against a fresh database and server,
// until the last one's answer, then checks that lines jobs are stored. It
// reports the wall time per batch, per step when there are several, and
// this process's CPU time per batch. A server without the first step's
// route (404) skips the benchmark.
func chatBatchAccept(b *testing.B, lines int, steps ...func(url string, prev []byte) *http.Request) {
	var total, cpu time.Duration
	perStep := make([]time.Duration, len(steps))
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		st := mustStore(b, filepath.Join(b.TempDir(), "bench.db"))
		srv := httptest.NewServer(serveAPI(st, 100_000))
		b.StartTimer()
		start, cpu0 := time.Now(), processCPU()
		var prev []byte
		for i, step := range steps {
			t0 := time.Now()
			resp, err := srv.Client().Do(step(srv.URL, prev))
			if err != nil {
				b.Fatal(err)
			}
			prev, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			perStep[i] += time.Since(t0)
			switch {
			case resp.StatusCode == http.StatusNotFound && i == 0:
				b.Skipf("%s is not served here: %s", resp.Request.URL.Path, prev)
			case resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK:
				b.Fatalf("%s: %d %s", resp.Request.URL.Path, resp.StatusCode, prev)
			}
		}
		total += time.Since(start)
		cpu += processCPU() - cpu0
		b.StopTimer()
		var jobs int
		if err := st.DB().QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&jobs); err != nil || jobs != lines {
			b.Fatalf("%d jobs stored (%v), want %d", jobs, err, lines)
		}
		srv.Close()
		st.Close()
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(total.Seconds()*1000/float64(b.N), "ms/batch")
	b.ReportMetric(float64(lines*b.N)/total.Seconds(), "lines/s")
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/batch")
	if len(steps) > 1 {
		for i, d := range perStep {
			b.ReportMetric(d.Seconds()*1000/float64(b.N), fmt.Sprintf("step%d-ms", i+1))
		}
	}
}

// chatForms are the bodies compared for memory: today's short request, the
// short form carrying the chat body's 1.8 KiB of user text, the 2 KiB chat
// request.
var chatForms = []struct {
	name string
	body []byte
}{{"short", shortBody}, {"short2k", shortBody2K}, {"chat", chatBody}}

// BenchmarkChatRSSCallsInFlight: the resident memory a call in flight
// takes in a real `inkwell serve` process (as BenchmarkServeRSSCallsInFlight
// measures it: --concurrency as many as the calls, the in-process sim
// provider at 30 s a call), for each form's body, with 1,000 and with
// 4,000 calls: RSS once the calls are running less RSS before the first
// request, per call, and the Go heap in use (not collected first) from its
// /metrics at that moment. The RSS is split into what the Go runtime holds
// and the rest, which is SQLite's page cache (its C runtime's memory): a
// cache of the rows last written, bounded by cache_size per connection,
// so its share per call falls as the calls grow. Compare the forms'
// figures of the same run:
//
//	go test -run xxx -bench BenchmarkChatRSSCallsInFlight -benchtime 1x -count 5 ./internal/bench
func BenchmarkChatRSSCallsInFlight(b *testing.B) {
	bin := mustBuildInkwell(b)
	for _, n := range []int{1000, 4000} {
		for _, form := range chatForms {
			chatRSSCallsInFlight(b, bin, n, form.name, form.body)
		}
	}
}

func chatRSSCallsInFlight(b *testing.B, bin string, n int, name string, body []byte) {
	calls := float64(n)
	b.Run(fmt.Sprintf("calls=%d/form=%s", n, name), func(b *testing.B) {
		for range b.N {
			db := filepath.Join(b.TempDir(), "inkwell.db")
			serve := startProc(b, bin, listenRE, "serve", "--db", db, "--addr", "127.0.0.1:0",
				"--concurrency", fmt.Sprint(n), "--sim-latency", "30s")
			url := "http://" + serve.addr
			idle, _ := procMemory(b, serve.cmd.Process.Pid)
			idleHeap, _ := metricstest.Sample(url, "go_memstats_heap_inuse_bytes")
			idleGo := goResident(url)
			postMany(b, url, n, body)
			waitRunning(b, mustStore(b, db), n)
			rss, _ := procMemory(b, serve.cmd.Process.Pid)
			heap, _ := metricstest.Sample(url, "go_memstats_heap_inuse_bytes")
			goRes := goResident(url)
			b.ReportMetric((rss-idle)*1024/calls, "RSS-KiB/call")
			b.ReportMetric((heap-idleHeap)/1024/calls, "heap-inuse-KiB/call")
			// What of the RSS the Go runtime holds (heap, garbage not
			// yet collected or returned, stacks) and what it does not
			// (SQLite's page cache, allocated by its C runtime).
			b.ReportMetric((goRes-idleGo)/1024/calls, "go-held-KiB/call")
			b.ReportMetric(((rss-idle)*(1<<20)-(goRes-idleGo))/1024/calls, "not-go-KiB/call")
			b.ReportMetric(rss, "RSS-MiB")
		}
	})
}

// goResident is the memory the Go runtime of the process serving url has
// from the OS and has not returned (go_memstats_sys_bytes less
// go_memstats_heap_released_bytes), in bytes.
func goResident(url string) float64 {
	sys, _ := metricstest.Sample(url, "go_memstats_sys_bytes")
	released, _ := metricstest.Sample(url, "go_memstats_heap_released_bytes")
	return sys - released
}

// BenchmarkChatHeapCallsInFlight: what stays reachable per call in flight,
// in this process: the API as serve wires it and one lane of 1,000 slots
// with the in-process sim at an hour a call, on SQLite. For each form's
// body, the live heap after a collection once 1,000 calls are running,
// less the live heap before the first request, per call; and the
// goroutine stacks likewise. Unlike RSS it does not move with when the
// collector last ran. With INKWELL_BENCH_HEAP_PROFILE=FILE each run writes
// the heap profile of that moment to FILE (run one form, with
// -memprofilerate 1, and read it with go tool pprof -sample_index
// inuse_space -top).
//
//	go test -run xxx -bench BenchmarkChatHeapCallsInFlight -benchtime 1x -count 5 ./internal/bench
func BenchmarkChatHeapCallsInFlight(b *testing.B) {
	const calls = 1000
	for _, form := range chatForms {
		b.Run("form="+form.name, func(b *testing.B) {
			for range b.N {
				heap, stacks := heapInFlight(b, calls, form.body)
				b.ReportMetric(heap/1024, "heap-live-KiB/call")
				b.ReportMetric(stacks/1024, "stacks-KiB/call")
			}
		})
	}
}

// heapInFlight runs calls calls of body to a lane of as many slots and
// returns the bytes of live heap and of goroutine stacks each adds.
func heapInFlight(b *testing.B, calls int, body []byte) (heap, stacks float64) {
	ctx, stop := context.WithCancel(context.Background())
	st := mustStore(b, filepath.Join(b.TempDir(), "bench.db"))
	lane := worker.New(st, worker.Config{Provider: provider.NewSim(time.Hour), Concurrency: calls, Grace: time.Millisecond})
	if _, err := lane.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer lane.Close()
	cfg := serveAPIConfig(st, 0)
	cfg.OnAccepted = lane.Wake
	srv := httptest.NewServer(api.New(cfg))
	defer srv.Close()
	done := make(chan error, 1)
	go func() { done <- lane.Run(ctx) }()
	defer func() { stop(); <-done }()
	heap0, stacks0 := liveMemory()
	postMany(b, srv.URL, calls, body)
	waitRunning(b, st, calls)
	heap1, stacks1 := liveMemory()
	if path := os.Getenv("INKWELL_BENCH_HEAP_PROFILE"); path != "" {
		writeHeapProfile(b, path)
	}
	return (heap1 - heap0) / float64(calls), (stacks1 - stacks0) / float64(calls)
}

// writeHeapProfile writes the heap profile as of the last collection to
// path (run with -memprofilerate 1 to see every allocation).
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// liveMemory collects, then reads the live heap and the stacks in use.
func liveMemory() (heap, stacks float64) {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64()), float64(s[1].Value.Uint64())
}

// postMany posts body n times to POST /v1/jobs from 16 clients, each with
// its own key.
func postMany(b *testing.B, url string, n int, body []byte) {
	b.Helper()
	var next, errs atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				req, _ := http.NewRequest(http.MethodPost, url+"/v1/jobs", bytes.NewReader(body))
				req.Header.Set("Idempotency-Key", fmt.Sprintf("mem-%d", i))
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != http.StatusCreated {
					errs.Add(1)
				}
				if resp != nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	if e := errs.Load(); e > 0 {
		b.Fatalf("%d of %d requests failed", e, n)
	}
}
