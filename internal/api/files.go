package api

import (
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/inkwell/inkwell"
	"github.com/inkwell/inkwell/internal/store"
)

// Files (docs/batches.md), the OpenAI Files API as far as batches need it:
// POST /v1/files takes a batch input file (multipart, purpose=batch) and
// keeps it; GET /v1/files/{id} describes a file and …/content returns it;
// GET /v1/files lists the uploads and DELETE /v1/files/{id} deletes one.
// A batch's output and errors are virtual files ("file-batch_<n>-output",
// "file-batch_<n>-errors"), made from its jobs when read. The lines of an
// upload are checked when a batch is made of it, as OpenAI does.

// maxFormBytes is what an upload's form may hold beside the file: the
// part headers, purpose and any expires_after fields.
const maxFormBytes = 64 << 10

// FileObject is a file as the OpenAI Files API describes one.
type FileObject struct {
	ID        string `json:"id"`
	Object    string `json:"object"` // "file"
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"` // unix seconds
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"` // "batch", or "batch_output" for a virtual file
	Status    string `json:"status"`  // "processed": a file is whole once stored
	// ExpiresAt is when an upload goes, in unix seconds (its
	// expires_after); absent when it is kept until deleted.
	ExpiresAt *int64 `json:"expires_at,omitempty"`
}

// handleFileUpload is POST /v1/files: 200 with the file object. The file is
// spooled and counted first, so a file past MaxBatchBytes or MaxBatchLines
// is 413 as soon as the limit is passed; every refusal writes nothing.
func (s *Server) handleFileUpload(w http.ResponseWriter, r *http.Request) {
	account, err := decideAccount(r, "")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	allowTransfer(w) // a large file is slower than serve's ReadTimeout
	up, err := readUpload(w, r)
	defer up.close()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f, err := s.cfg.Store.CreateFile(r.Context(), store.FileParams{Account: account, Purpose: up.purpose, Filename: up.filename,
		Bytes: up.count.bytes, Lines: up.count.total(), Content: up.file, ExpiresAfter: up.expiresAfter})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "file stored", "file_id", f.ID, "bytes", f.Bytes, "lines", f.Lines)
	writeJSON(w, http.StatusOK, fileObject(f))
}

// handleFileShow is GET /v1/files/{id}.
func (s *Server) handleFileShow(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if batchID, status, ok := parseBatchFileID(id); ok {
		f, err := s.batchFile(r, id, batchID, status)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, f)
		return
	}
	f, err := s.ownFile(r, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, fileObject(f))
}

// handleFileContent is GET /v1/files/{id}/content: an upload as it was
// received, or a batch's lines (writeBatchLines), streamed.
func (s *Server) handleFileContent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if batchID, status, ok := parseBatchFileID(id); ok {
		if _, err := s.ownBatchFile(r, id, batchID, status); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeBatchLines(w, r, batchID, status)
		return
	}
	f, err := s.ownFile(r, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	content, err := s.cfg.Store.FileContent(r.Context(), f.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	allowTransfer(w) // a large file is slower than serve's WriteTimeout
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	if _, err := io.Copy(w, content); err != nil {
		s.log.WarnContext(r.Context(), "file content cut short", "file_id", f.ID, "err", err)
	}
}

// FileDeleted is DELETE /v1/files/{id}'s answer, OpenAI's form.
type FileDeleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "file"
	Deleted bool   `json:"deleted"`
}

// handleFileDelete is DELETE /v1/files/{id}: an upload's content goes, and
// the file is 404 from then on (store.DeleteFile). A batch made of it
// keeps its lines. A batch's output or error file is made from the
// batch's jobs whenever it is read: there is nothing apart from them to
// delete, so it is refused (400) rather than answered "deleted" while it
// stays readable.
func (s *Server) handleFileDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if batchID, status, ok := parseBatchFileID(id); ok {
		if _, err := s.ownBatchFile(r, id, batchID, status); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeError(w, r, inkwell.Errorf(inkwell.EINVALID,
			"file %q is made from the jobs of batch %s%d whenever it is read: it cannot be deleted apart from them (retention prunes a batch's jobs once the whole batch ended: docs/retention.md); nothing was deleted",
			id, openAIBatchPrefix, batchID))
		return
	}
	by := actor(r)
	f, err := s.ownFile(r, id)
	if err == nil {
		f, err = s.cfg.Store.DeleteFile(r.Context(), f.ID, by)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "file deleted", "file_id", f.ID, "account", f.Account, "bytes", f.Bytes, "by", by)
	writeJSON(w, http.StatusOK, FileDeleted{ID: f.ID, Object: "file", Deleted: true})
}

// FileList is GET /v1/files.
type FileList = List[FileObject]

// maxFilePage is the most files one page lists, and the default: OpenAI's.
const maxFilePage = 10000

// handleFileList is GET /v1/files: the caller's uploads (every account's
// for an operator), newest first, as OpenAI pages them (limit, after,
// order, purpose). A batch's output and error files are not listed: they
// are the batch's, read from it (output_file_id, error_file_id).
func (s *Server) handleFileList(w http.ResponseWriter, r *http.Request) {
	l, err := filePageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if tok := principalOf(r.Context()); tok != nil && tok.Role != store.RoleOperator {
		l.Account = tok.Account
	}
	files, more, err := s.cfg.Store.Files(r.Context(), l)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	data := make([]FileObject, 0, len(files))
	for _, f := range files {
		data = append(data, fileObject(f))
	}
	writeJSON(w, http.StatusOK, newList(data, more, func(f FileObject) string { return f.ID }))
}

// filePageParams reads GET /v1/files's query: limit, after, order and
// purpose, each checked; a purpose other than batch lists nothing, as
// there are no such files.
func filePageParams(r *http.Request) (store.FileList, error) {
	q := r.URL.Query()
	l := store.FileList{Purpose: q.Get("purpose")}
	var err error
	if l.Limit, err = pageLimit(q, maxFilePage, maxFilePage); err != nil {
		return l, err
	}
	switch v := q.Get("order"); v {
	case "", "desc":
	case "asc":
		l.Ascending = true
	default:
		return l, inkwell.Errorf(inkwell.EINVALID, `order must be "asc" or "desc", not %q`, v)
	}
	if v := q.Get("after"); v != "" {
		if !isUploadID(v) {
			return l, inkwell.Errorf(inkwell.EINVALID, "after must be a file id, file-<24 hex digits> (the last id of the page before), not %q", v)
		}
		l.After = v
	}
	if !utf8.ValidString(l.Purpose) || strings.ContainsRune(l.Purpose, 0) {
		return l, inkwell.Errorf(inkwell.EINVALID, "purpose must be text, not %q", l.Purpose)
	}
	return l, nil
}

// ownFile reads an uploaded file as its caller may see it: a client
// token's another account's file is ENOTFOUND, worded as no such file. An
// id of another shape than the store makes (isUploadID) is ENOTFOUND
// before any query, in the same words: PostgreSQL refuses a string with
// NUL or invalid UTF-8 in a query (SQLSTATE 22021), which was a 500.
func (s *Server) ownFile(r *http.Request, id string) (store.File, error) {
	if !isUploadID(id) {
		return store.File{}, inkwell.Errorf(inkwell.ENOTFOUND, "file %q not found", id)
	}
	f, err := s.cfg.Store.File(r.Context(), id)
	if tok := principalOf(r.Context()); err == nil && tok != nil && tok.Role != store.RoleOperator && f.Account != tok.Account {
		err = inkwell.Errorf(inkwell.ENOTFOUND, "file %q not found", id)
	}
	return f, err
}

// isUploadID reports whether id has the shape of an uploaded file's id,
// as the store makes one (store.File.ID): "file-" and 24 lowercase hex
// digits.
func isUploadID(id string) bool {
	hex, ok := strings.CutPrefix(id, "file-")
	if !ok || len(hex) != 24 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// The virtual files of batch n: its done lines and its failed lines.
const (
	batchFilePrefix = "file-batch_"
	outputSuffix    = "-output"
	errorsSuffix    = "-errors"
)

// batchFileID is the id of batch id's output (done lines) or error file.
func batchFileID(id int64, status string) string {
	suffix := outputSuffix
	if status == inkwell.StatusFailed {
		suffix = errorsSuffix
	}
	return batchFilePrefix + strconv.FormatInt(id, 10) + suffix
}

// parseBatchFileID reads a virtual file's id: the batch and which of its
// lines (done or failed).
func parseBatchFileID(id string) (batchID int64, status string, ok bool) {
	rest, ok := strings.CutPrefix(id, batchFilePrefix)
	if !ok {
		return 0, "", false
	}
	digits, status := rest, ""
	if d, cut := strings.CutSuffix(rest, outputSuffix); cut {
		digits, status = d, inkwell.StatusDone
	} else if d, cut := strings.CutSuffix(rest, errorsSuffix); cut {
		digits, status = d, inkwell.StatusFailed
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if status == "" || err != nil || n < 1 || digits[0] == '+' {
		return 0, "", false
	}
	return n, status, true
}

// ownBatchFile reads the batch of a virtual file as its caller may see
// it: the file exists once the batch has a line to put in it.
func (s *Server) ownBatchFile(r *http.Request, id string, batchID int64, status string) (store.BatchStatus, error) {
	st, err := s.ownBatchID(r, batchID)
	if inkwell.ErrorCode(err) == inkwell.ENOTFOUND || (err == nil && st.Counts[status] == 0) {
		return st, inkwell.Errorf(inkwell.ENOTFOUND, "file %q not found", id)
	}
	return st, err
}

// batchFile describes a batch's output or error file; its size is
// counted by making it.
func (s *Server) batchFile(r *http.Request, id string, batchID int64, status string) (FileObject, error) {
	st, err := s.ownBatchFile(r, id, batchID, status)
	if err != nil {
		return FileObject{}, err
	}
	var size countWriter
	err = s.cfg.Store.BatchEnded(r.Context(), batchID, status, func(bj store.BatchJob) error {
		return jsonLine(&size, batchOutputLine(bj))
	})
	if err != nil {
		return FileObject{}, err
	}
	created := st.CreatedAt
	if st.LastEndedAt != nil {
		created = *st.LastEndedAt
	}
	name := "batch_" + strconv.FormatInt(batchID, 10) + "_output.jsonl"
	if status == inkwell.StatusFailed {
		name = "batch_" + strconv.FormatInt(batchID, 10) + "_errors.jsonl"
	}
	return FileObject{ID: id, Object: "file", Bytes: int64(size), CreatedAt: created.Unix(), Filename: name, Purpose: "batch_output", Status: "processed"}, nil
}

func fileObject(f store.File) FileObject {
	o := FileObject{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.CreatedAt.Unix(), Filename: f.Filename, Purpose: f.Purpose, Status: "processed"}
	if f.ExpiresAt != nil {
		t := f.ExpiresAt.Unix()
		o.ExpiresAt = &t
	}
	return o
}

// upload is a POST /v1/files form as received: its file spooled to a
// temporary file (at its start, once read), counted.
type upload struct {
	purpose, filename string
	// expiresAnchor and expiresSeconds are expires_after's fields as
	// sent (set: the field was in the form).
	expiresAnchor, expiresSeconds *string
	expiresAfter                  time.Duration // checked (check)
	file                          *os.File
	unlinked                      bool // file has no name left: closing it frees it
	count                         lineCounter
}

// readUpload reads the multipart form: one "file" part, "purpose",
// expires_after[anchor] and expires_after[seconds], and any other small
// field (read and not used).
func readUpload(w http.ResponseWriter, r *http.Request) (*upload, error) {
	up := &upload{}
	ct := r.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return up, inkwell.Errorf(inkwell.EMEDIATYPE, "Content-Type %q is not read here: send multipart/form-data with a \"file\" part and purpose=batch", ct)
	}
	if r.ContentLength > MaxBatchBytes+maxFormBytes {
		return up, fileTooLarge()
	}
	mr := multipart.NewReader(http.MaxBytesReader(w, r.Body, MaxBatchBytes+maxFormBytes), params["boundary"])
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return up, formError(err)
		}
		if err := up.readPart(part); err != nil {
			return up, err
		}
	}
	return up, up.check()
}

// readPart reads one part of the form.
func (up *upload) readPart(part *multipart.Part) error {
	defer part.Close()
	switch part.FormName() {
	case "file":
		if up.file != nil {
			return inkwell.Errorf(inkwell.EINVALID, "the form has two \"file\" parts: send one file per upload")
		}
		up.filename = part.FileName()
		return up.spool(part)
	case "purpose":
		b, err := io.ReadAll(io.LimitReader(part, 65))
		if err != nil {
			return formError(err)
		}
		up.purpose = string(b)
		return up.checkPurpose() // before a file that follows is read
	case "expires_after[anchor]", "expires_after[seconds]":
		b, err := io.ReadAll(io.LimitReader(part, 65))
		if err != nil {
			return formError(err)
		}
		if len(b) > 64 {
			return inkwell.Errorf(inkwell.EINVALID, "%s is over 64 bytes; nothing was stored", part.FormName())
		}
		field, v := &up.expiresSeconds, string(b)
		if part.FormName() == "expires_after[anchor]" {
			field = &up.expiresAnchor
		}
		if *field != nil {
			return inkwell.Errorf(inkwell.EINVALID, "the form has %s twice: send it once; nothing was stored", part.FormName())
		}
		*field = &v
	default:
		if _, err := io.Copy(io.Discard, io.LimitReader(part, maxFormBytes)); err != nil {
			return formError(err)
		}
	}
	return nil
}

// spool copies the file part to a temporary file, counting as it goes:
// the counter refuses the chunk that passes a limit before it is written.
func (up *upload) spool(part io.Reader) error {
	f, err := os.CreateTemp("", "inkwell-upload-*")
	if err != nil {
		return inkwell.Errorf(inkwell.EUNAVAILABLE, "no room for the upload: %v", err)
	}
	up.file = f
	// Unlinked at once, it is read through f alone and the kernel frees
	// it when f closes, however the process ends: a serve killed mid-upload
	// leaves nothing in the temporary directory. Where an open file cannot
	// be removed (Windows), close removes it.
	up.unlinked = os.Remove(f.Name()) == nil
	if _, err := io.Copy(io.MultiWriter(&up.count, f), part); err != nil {
		var e *inkwell.Error
		if errors.As(err, &e) {
			return e
		}
		return formError(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return inkwell.Errorf(inkwell.EUNAVAILABLE, "read back the upload: %v", err)
	}
	return nil
}

// check refuses a form without its file, its purpose or a usable name.
func (up *upload) check() error {
	switch {
	case up.file == nil:
		return inkwell.Errorf(inkwell.EINVALID, "the form has no \"file\" part: send the JSONL file of requests as \"file\", with purpose=batch")
	case up.purpose == "":
		return inkwell.Errorf(inkwell.EINVALID, "purpose is required: send purpose=batch")
	case len(up.filename) > 255 || !utf8.ValidString(up.filename) || strings.ContainsFunc(up.filename, unicode.IsControl):
		return inkwell.Errorf(inkwell.EINVALID, "the file's name must be UTF-8 without control characters, at most 255 bytes")
	}
	if up.filename == "" {
		up.filename = "upload.jsonl"
	}
	if err := up.checkExpiry(); err != nil {
		return err
	}
	return up.checkPurpose()
}

// The bounds of expires_after[seconds], OpenAI's: an hour to 30 days.
const (
	minFileExpiry = 3600
	maxFileExpiry = 30 * 24 * 3600
)

// checkExpiry reads expires_after as OpenAI takes it: both fields or
// neither, anchor created_at, seconds a whole number of them from an hour
// to 30 days.
func (up *upload) checkExpiry() error {
	if up.expiresAnchor == nil && up.expiresSeconds == nil {
		return nil
	}
	if up.expiresAnchor == nil || up.expiresSeconds == nil {
		return inkwell.Errorf(inkwell.EINVALID, "expires_after needs both anchor and seconds (expires_after[anchor]=created_at, expires_after[seconds]=N); nothing was stored")
	}
	if *up.expiresAnchor != "created_at" {
		return inkwell.Errorf(inkwell.EINVALID, "expires_after[anchor] must be created_at, not %q; nothing was stored", *up.expiresAnchor)
	}
	n, err := strconv.ParseInt(*up.expiresSeconds, 10, 64)
	if err != nil || n < minFileExpiry || n > maxFileExpiry {
		return inkwell.Errorf(inkwell.EINVALID, "expires_after[seconds] must be a whole number from %d (an hour) to %d (30 days), not %q; nothing was stored", minFileExpiry, maxFileExpiry, *up.expiresSeconds)
	}
	up.expiresAfter = time.Duration(n) * time.Second
	return nil
}

// checkPurpose refuses any purpose but batch: no other file is kept.
func (up *upload) checkPurpose() error {
	if up.purpose != store.FilePurposeBatch {
		return inkwell.Errorf(inkwell.EINVALID, "purpose %q is not kept here: only purpose=batch files are (the input of POST /v1/batches)", up.purpose)
	}
	return nil
}

// close removes the temporary file.
func (up *upload) close() {
	if up != nil && up.file != nil {
		up.file.Close()
		if !up.unlinked {
			os.Remove(up.file.Name())
		}
	}
}

// lineCounter counts bytes and non-blank lines (each a request), and
// refuses the write that passes MaxBatchBytes or MaxBatchLines. A byte
// order mark at the start of the file is not a line's content, as
// parseBatchLines skips it (skipBOM).
type lineCounter struct {
	bytes   int64
	lines   int  // ended lines that held more than white space
	pending bool // the line being read holds more than white space
	bom     int  // the bytes of a BOM the file starts with, so far
	pastBOM bool // the file's start is read: a BOM, or not one
}

func (c *lineCounter) Write(p []byte) (int, error) {
	if c.bytes += int64(len(p)); c.bytes > MaxBatchBytes {
		return 0, fileTooLarge()
	}
	for _, b := range p {
		if !c.pastBOM {
			if b == utf8BOM[c.bom] {
				c.bom++
				c.pastBOM = c.bom == len(utf8BOM)
				continue
			}
			c.pastBOM = true
			c.pending = c.bom > 0 // a BOM's first bytes and then another: content
		}
		switch {
		case b == '\n':
			if c.pending {
				c.lines++
			}
			c.pending = false
		case !blankByte(b): // the one blank of parseBatchLines
			c.pending = true
		}
	}
	if c.total() > MaxBatchLines {
		return 0, inkwell.Errorf(inkwell.ETOOLARGE, "the file has more than %d lines (requests): a batch holds at most %d; split it into several files, each its own batch; nothing was stored", MaxBatchLines, MaxBatchLines)
	}
	return len(p), nil
}

// total is the lines counted, the last one too when it has no newline.
func (c *lineCounter) total() int {
	if c.pending || !c.pastBOM && c.bom > 0 { // a file of a BOM's first bytes only: a line parseBatchLines reads
		return c.lines + 1
	}
	return c.lines
}

// countWriter counts what is written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// formError turns a failure to read the form into its answer: 413 past
// the body's limit, else 400.
func formError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return fileTooLarge()
	}
	return inkwell.Errorf(inkwell.EINVALID, "reading the multipart form: %v", err)
}

func fileTooLarge() error {
	return inkwell.Errorf(inkwell.ETOOLARGE, "the file is over %d bytes (100 MiB): split it into smaller files, each its own batch; nothing was stored", MaxBatchBytes)
}
