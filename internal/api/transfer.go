package api

import (
	"net/http"
	"time"
)

// transferWindow is how long an upload to POST /v1/files, or a download
// of a file's content, may take: serve's ReadTimeout (30 s) and
// WriteTimeout (1 m) are sized for a JSON request and its answer, and a
// 100 MB file over a slow link takes longer (at 30 s, any upload under
// 3.5 MB/s failed, and a slow reader of a large output got it cut short,
// a truncated body with no error). Fifteen minutes is 100 MB at about
// 110 KB/s; a client slower than that, or gone silent, is still cut off.
const transferWindow = 15 * time.Minute

// allowTransfer pushes the connection's read and write deadlines out by
// transferWindow for one large transfer (the next request on the
// connection gets the server's own again). Some writers (httptest's
// recorder) have no deadlines: nothing is done there.
func allowTransfer(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(transferWindow)
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline.Add(waitWriteMargin))
}
