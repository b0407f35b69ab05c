package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/client"
	"github.com/inkwell/inkwell/internal/api"
	"github.com/inkwell/inkwell/internal/jobwait"
	"github.com/inkwell/inkwell/internal/provider"
	"github.com/inkwell/inkwell/internal/store"
	"github.com/inkwell/inkwell/internal/worker"
)

func Example() {
	url, stop := exampleServer() // an Inkwell server on loopback, as `inkwell serve` runs one
	defer stop()

	c := client.New(url) // client.WithToken(os.Getenv("INKWELL_TOKEN")) once tokens exist
	ctx := context.Background()
	req := inkwell.Request{Prompt: "a haiku about ink", MaxWords: 20}
	sub, err := c.Submit(ctx, req)
	if client.OutcomeUnknown(err) {
		// Lost on the way, or the server failed: the same key is safe.
		sub, err = c.SubmitKey(ctx, sub.Key, req)
	}
	if err != nil {
		log.Fatal(err) // a refusal: client.Code(err) says which, the message what to fix
	}
	d, err := c.Wait(ctx, sub.Job.ID) // long-polls until done or failed
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sub.Created, d.Job.Status, d.Result.Text != "")
	// Output: true done true
}

// exampleServer runs Inkwell's API and a worker lane (the in-process sim
// provider) over a SQLite file in a temporary directory.
func exampleServer() (url string, stop func()) {
	dir, err := os.MkdirTemp("", "inkwell-example")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(dir, "inkwell.db"), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	waits := jobwait.New()
	lane := worker.New(st, worker.Config{Provider: provider.NewSim(0), OnEnded: func(id int64) { waits.Wake(id) }})
	if _, err := lane.Open(ctx); err != nil {
		log.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- lane.Run(ctx) }()
	srv := api.New(api.Config{Store: st, OnAccepted: lane.Wake, Waits: waits})
	srv.SetReady(true)
	hs := httptest.NewServer(srv)
	return hs.URL, func() {
		hs.Close()
		cancel()
		<-ran
		lane.Close()
		st.Close()
		os.RemoveAll(dir)
	}
}
