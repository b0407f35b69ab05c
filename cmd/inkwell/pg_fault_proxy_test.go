package main_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// pgFaultProxy is a TCP proxy on loopback between `inkwell serve` and
// PostgreSQL that the test can freeze (stop forwarding, the connections
// left open, like a stalled network), reset (close every connection), or
// arm to lose one answer: the server's reply to one statement is read in
// full (the statement has committed) and the connection is then closed
// without forwarding it, as a connection reset after the commit would.
type pgFaultProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	conns  map[*proxyConn]bool
	// drop, when set, loses the next reply with rows on a connection that
	// matches it (one shot); dropped counts replies lost.
	drop    *dropRule
	dropped int
}

// dropRule picks the connection whose next reply with rows is lost: its
// application_name, or a text its client sent (a statement's SQL).
type dropRule struct {
	app    string
	marker string
}

type proxyConn struct {
	client, server net.Conn
	app            string
	marked         bool // the client sent the rule's marker
}

func startPGFaultProxy(t *testing.T, dsn string) (*pgFaultProxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgFaultProxy{ln: ln, target: u.Host, conns: map[*proxyConn]bool{}}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.thaw()
		p.reset()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *pgFaultProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *pgFaultProxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	pc := &proxyConn{client: client, server: server}
	p.mu.Lock()
	p.conns[pc] = true
	p.mu.Unlock()
	defer func() {
		client.Close()
		server.Close()
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	cr := bufio.NewReader(client)
	// The startup packet (after an SSL request, refused, if any): it
	// names the application.
	for {
		pkt, err := readStartup(cr)
		if err != nil {
			return
		}
		if _, err := server.Write(pkt); err != nil {
			return
		}
		if len(pkt) == 8 && binary.BigEndian.Uint32(pkt[4:]) == 80877103 { // SSLRequest: one byte answer
			b := make([]byte, 1)
			if _, err := io.ReadFull(server, b); err != nil {
				return
			}
			client.Write(b)
			continue
		}
		pc.app = startupParam(pkt[8:], "application_name")
		break
	}
	done := make(chan struct{}, 2)
	go func() { p.clientToServer(pc, cr); done <- struct{}{} }()
	go func() { p.serverToClient(pc); done <- struct{}{} }()
	<-done
}

func readStartup(r *bufio.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	l := binary.BigEndian.Uint32(n[:])
	pkt := make([]byte, l)
	copy(pkt, n[:])
	_, err := io.ReadFull(r, pkt[4:])
	return pkt, err
}

func startupParam(b []byte, name string) string {
	parts := bytes.Split(b, []byte{0})
	for i := 0; i+1 < len(parts); i += 2 {
		if string(parts[i]) == name {
			return string(parts[i+1])
		}
	}
	return ""
}

func (p *pgFaultProxy) clientToServer(pc *proxyConn, r io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.waitThawed()
			p.mu.Lock()
			if p.drop != nil && p.drop.marker != "" && bytes.Contains(buf[:n], []byte(p.drop.marker)) {
				pc.marked = true
			}
			p.mu.Unlock()
			if _, werr := pc.server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// serverToClient forwards the server's messages one reply (up to
// ReadyForQuery) at a time, so that a reply can be lost whole.
func (p *pgFaultProxy) serverToClient(pc *proxyConn) {
	r := bufio.NewReaderSize(pc.server, 64<<10)
	var reply []byte
	rows := false
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		msg := make([]byte, 1+binary.BigEndian.Uint32(hdr[1:]))
		copy(msg, hdr[:])
		if _, err := io.ReadFull(r, msg[5:]); err != nil {
			return
		}
		reply = append(reply, msg...)
		if hdr[0] == 'D' {
			rows = true
		}
		p.mu.Lock()
		armed := p.drop != nil && ((p.drop.app != "" && pc.app == p.drop.app) || (p.drop.marker != "" && pc.marked))
		p.mu.Unlock()
		if hdr[0] != 'Z' && (armed || r.Buffered() > 0) {
			continue // a reply that may be lost is held whole; else the rest of it is here already
		}
		if hdr[0] == 'Z' {
			p.mu.Lock()
			lose := rows && p.drop != nil && ((p.drop.app != "" && pc.app == p.drop.app) || (p.drop.marker != "" && pc.marked))
			if lose {
				p.drop = nil
				p.dropped++
			}
			p.mu.Unlock()
			if lose { // the statement committed; its answer never arrives
				pc.client.Close()
				pc.server.Close()
				return
			}
		}
		p.waitThawed()
		if _, err := pc.client.Write(reply); err != nil {
			return
		}
		if hdr[0] == 'Z' {
			rows = false
		}
		reply = reply[:0]
	}
}

func (p *pgFaultProxy) waitThawed() {
	p.mu.Lock()
	for p.frozen {
		p.cond.Wait()
	}
	p.mu.Unlock()
}

func (p *pgFaultProxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

func (p *pgFaultProxy) thaw() {
	p.mu.Lock()
	p.frozen = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// reset closes every connection through the proxy.
func (p *pgFaultProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.conns {
		pc.client.Close()
		pc.server.Close()
	}
}

func (p *pgFaultProxy) armDrop(r dropRule) {
	p.mu.Lock()
	p.drop = &r
	p.mu.Unlock()
}

func (p *pgFaultProxy) droppedReplies() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped
}

// appNames lists the application names of the connections open now.
func (p *pgFaultProxy) appNames() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for pc := range p.conns {
		names = append(names, pc.app)
	}
	return strings.Join(names, ",")
}
