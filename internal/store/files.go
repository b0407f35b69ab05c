package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/inkwell/inkwell"
)

// Files (docs/batches.md): uploads of the OpenAI Files API, kept as the
// input of batches. A file is written once, row and parts in one
// transaction, and never changed until it is deleted (its parts gone, its
// row marked); its content lives in file_parts, in parts of
// FilePartBytes, so nothing holds a whole file in memory.

// FilePartBytes is the size of every part of a file's content but its last.
const FilePartBytes = 1 << 20

// FilePurposeBatch is the one purpose a file may have: a batch's input.
const FilePurposeBatch = "batch"

// File is one row of files.
type File struct {
	ID        string // "file-" and 24 hex digits
	Account   string
	Purpose   string
	Filename  string
	Bytes     int64
	Lines     int // the non-blank lines, each a request
	CreatedAt time.Time
	// ExpiresAt is when the file goes (the upload's expires_after); nil:
	// it is kept until deleted.
	ExpiresAt *time.Time
}

// FileParams is a file to store: its content is read from Content (nil:
// none), which must hold exactly Bytes bytes.
type FileParams struct {
	Account, Purpose, Filename string
	Bytes                      int64
	Lines                      int
	Content                    io.Reader
	// ExpiresAfter, when not 0, is how long after it is stored the file
	// goes (OpenAI's expires_after, anchored at created_at).
	ExpiresAfter time.Duration
}

// CreateFile stores a new file under a new random id: the row and every
// part in one transaction, reading Content one part at a time. Content
// that is not Bytes long refuses the file, writing nothing.
func (s *Store) CreateFile(ctx context.Context, p FileParams) (File, error) {
	if p.Purpose != FilePurposeBatch {
		return File{}, inkwell.Errorf(inkwell.EINVALID, "purpose %q: only %q files are kept", p.Purpose, FilePurposeBatch)
	}
	if err := s.refuseWhileLost(); err != nil {
		return File{}, err
	}
	f := File{ID: newFileID(), Account: p.Account, Purpose: p.Purpose, Filename: p.Filename, Bytes: p.Bytes, Lines: p.Lines, CreatedAt: s.now()}
	var expires any
	if p.ExpiresAfter > 0 {
		t := f.CreatedAt.Add(p.ExpiresAfter)
		f.ExpiresAt, expires = &t, s.ts(t)
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		const insert = `INSERT INTO files (id, account, purpose, filename, bytes, lines, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
		if _, err := s.txExec(ctx, tx, insert, f.ID, f.Account, f.Purpose, f.Filename, f.Bytes, f.Lines, s.ts(f.CreatedAt), expires); err != nil {
			return fmt.Errorf("store file: %w", err)
		}
		return s.insertFileParts(ctx, tx, f.ID, p.Bytes, p.Content)
	})
	if err != nil {
		return File{}, err
	}
	return f, nil
}

// insertFileParts copies want bytes of content into file_parts.
func (s *Store) insertFileParts(ctx context.Context, tx *sql.Tx, id string, want int64, content io.Reader) error {
	const insert = `INSERT INTO file_parts (file_id, part, data) VALUES ($1, $2, $3)`
	if content == nil {
		content = bytes.NewReader(nil)
	}
	buf := make([]byte, FilePartBytes)
	var got int64
	for part := 0; ; part++ {
		n, err := io.ReadFull(content, buf)
		if n > 0 {
			got += int64(n)
			if _, xerr := tx.ExecContext(ctx, s.dialect.rebind(insert), id, part, buf[:n]); xerr != nil {
				return fmt.Errorf("store file: part %d: %w", part, xerr)
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("store file: read its content: %w", err)
		}
	}
	if got != want {
		return inkwell.Errorf(inkwell.EINVALID, "the file's content is %d bytes, not the %d announced: nothing was stored", got, want)
	}
	return nil
}

// fileColumns are the columns of files that File holds.
const fileColumns = `id, account, purpose, filename, bytes, lines, created_at, expires_at`

// fileLive is the condition (SQL) on a row of files that it is a file to
// the API: not deleted, and not expired at $1 (Store.clockArg: on
// PostgreSQL the statement reads the database's clock itself, no round
// trip first).
func (s *Store) fileLive() string {
	return `deleted_at IS NULL AND (expires_at IS NULL OR expires_at > ` + s.dialect.clockOr("$1") + `)`
}

// scanFile reads one row of fileColumns.
func scanFile(row rowScanner) (File, error) {
	var f File
	var created, expires nullTime
	if err := row.Scan(&f.ID, &f.Account, &f.Purpose, &f.Filename, &f.Bytes, &f.Lines, &created, &expires); err != nil {
		return File{}, err
	}
	f.CreatedAt, f.ExpiresAt = created.Time, expires.Ptr()
	return f, nil
}

// File returns one file's row (ENOTFOUND for no such file, a deleted one,
// or one past its expiry, whose content retention has yet to delete).
func (s *Store) File(ctx context.Context, id string) (File, error) {
	q := `SELECT ` + fileColumns + ` FROM files WHERE id = $2 AND ` + s.fileLive()
	f, err := scanFile(s.rdb.QueryRowContext(ctx, s.dialect.rebind(q), s.clockArg(), id))
	if err != nil {
		return File{}, s.classify(notFound(err, "file %q", id))
	}
	return f, nil
}

// FileList is which files Files lists: one account's (every account's
// when Account is ""), of one purpose ("": any), at most Limit of them,
// newest first (oldest first when Ascending), after the file After (""
// from the start), as the OpenAI Files API pages them.
type FileList struct {
	Account, Purpose, After string
	Limit                   int
	Ascending               bool
}

// Files lists the files that are not deleted, in created_at and then id
// order (ids are random, so the time orders them), and whether more
// follow. After names a file the caller saw on a page before, deleted
// since or not: ENOTFOUND when it is no file of that account.
func (s *Store) Files(ctx context.Context, l FileList) (files []File, more bool, err error) {
	cmp, dir := ">", "ASC"
	if !l.Ascending {
		cmp, dir = "<", "DESC"
	}
	q := `SELECT ` + fileColumns + ` FROM files f WHERE ` + s.fileLive() + `
		AND ($2 = '' OR account = $2) AND ($3 = '' OR purpose = $3)`
	args := []any{s.clockArg(), l.Account, l.Purpose}
	if l.After != "" {
		// The file named may be deleted (or expired) since the page
		// before listed it: its row stays, so the next page is still
		// where it was. A script that deletes each file as it lists
		// them pages on.
		var account string
		err := s.rdb.QueryRowContext(ctx, s.dialect.rebind(`SELECT account FROM files WHERE id = $1`), l.After).Scan(&account)
		if err == nil && l.Account != "" && account != l.Account {
			err = sql.ErrNoRows
		}
		if err != nil {
			return nil, false, s.classify(notFound(err, "file %q", l.After))
		}
		q += ` AND (created_at, id) ` + cmp + ` (SELECT a.created_at, a.id FROM files a WHERE a.id = $4)`
		args = append(args, l.After)
	}
	q += ` ORDER BY created_at ` + dir + `, id ` + dir + ` LIMIT ` + strconv.Itoa(l.Limit+1)
	rows, err := s.rdb.QueryContext(ctx, s.dialect.rebind(q), args...)
	if err != nil {
		return nil, false, s.classify(fmt.Errorf("list files: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, false, s.classify(fmt.Errorf("list files: %w", err))
		}
		files = append(files, f)
	}
	if err := rows.Err(); err != nil {
		return nil, false, s.classify(fmt.Errorf("list files: %w", err))
	}
	if len(files) > l.Limit {
		return files[:l.Limit], true, nil
	}
	return files, false, nil
}

// DeleteFile deletes an upload: its content goes, and its row is marked
// deleted (deleted_at, and deleted_by: by, an actor as audit_log names
// one), in one transaction; the row stays for the batches
// that name it (migration 0022). It deletes a file past its expiry too
// (DeleteExpiredFiles). A batch already made of the file keeps
// its lines: they were copied into its jobs when it was made. ENOTFOUND
// when there is no such file, or it was deleted already.
func (s *Store) DeleteFile(ctx context.Context, id, by string) (File, error) {
	if err := s.refuseWhileLost(); err != nil {
		return File{}, err
	}
	var f File
	now := s.nowTS()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		mark := `UPDATE files SET deleted_at = $1, deleted_by = $3 WHERE id = $2 AND deleted_at IS NULL RETURNING ` + fileColumns
		var err error
		if f, err = scanFile(tx.QueryRowContext(ctx, s.dialect.rebind(mark), now, id, nullString(by))); err != nil {
			return notFound(err, "file %q", id)
		}
		if _, err := tx.ExecContext(ctx, s.dialect.rebind(`DELETE FROM file_parts WHERE file_id = $1`), id); err != nil {
			return fmt.Errorf("delete file %q: its content: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return File{}, err
	}
	return f, nil
}

// Expired is what DeleteExpiredFiles did, or would do (a dry run).
type Expired struct {
	Files int
	Bytes int64
}

// DeleteExpiredFiles deletes the uploads whose expiry has passed, as
// DeleteFile does (content gone, row marked deleted), one file a
// transaction, so that a 100 MB file holds the writer for its own parts
// only; a dry run counts them and writes nothing. The API answers such a
// file 404 from its expiry on (File); this gives its space back. It stops
// when ctx ends: what it deleted stays deleted. A file another process
// deletes meanwhile is not counted.
func (s *Store) DeleteExpiredFiles(ctx context.Context, dryRun bool, by string) (Expired, error) {
	const due = ` FROM files WHERE expires_at <= $1 AND deleted_at IS NULL`
	var out Expired
	if dryRun {
		err := s.rdb.QueryRowContext(ctx, s.dialect.rebind(`SELECT COUNT(*), COALESCE(SUM(bytes), 0)`+due), s.nowTS()).Scan(&out.Files, &out.Bytes)
		return out, s.classify(err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		var id string
		err := s.rdb.QueryRowContext(ctx, s.dialect.rebind(`SELECT id`+due+` ORDER BY expires_at, id LIMIT 1`), s.nowTS()).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return out, nil
		}
		if err != nil {
			return out, s.classify(fmt.Errorf("find an expired file: %w", err))
		}
		f, err := s.DeleteFile(ctx, id, by)
		if inkwell.ErrorCode(err) == inkwell.ENOTFOUND {
			continue // deleted meanwhile, by a client or another lane
		}
		if err != nil {
			return out, err
		}
		out.Files++
		out.Bytes += f.Bytes
	}
}

// FileContent returns a reader of a file's content, one part per query: a
// file never changes, so no transaction is held open while a slow client
// reads. ENOTFOUND for no such file. A file deleted while it is read ends
// the reader with an error, never with a short file taken for the whole
// (a batch made of it would have lost lines).
func (s *Store) FileContent(ctx context.Context, id string) (io.Reader, error) {
	f, err := s.File(ctx, id)
	if err != nil {
		return nil, err
	}
	// The first part is read now, so that a file deleted since File
	// read its row is not found here, before a caller answers 200.
	r := &fileReader{ctx: ctx, s: s, id: id, want: f.Bytes}
	if err := r.next(); err != nil {
		return nil, err
	}
	return r, nil
}

// fileReader reads file_parts in order, one part in memory at a time.
type fileReader struct {
	ctx  context.Context
	s    *Store
	id   string
	part int
	cur  []byte
	done bool
	// want is the file's size, got the bytes read so far.
	want, got int64
}

func (r *fileReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.done {
			return 0, io.EOF
		}
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// next loads the next part; past the last one the reader is done. A part
// missing before want bytes were read is the file deleted meanwhile.
func (r *fileReader) next() error {
	const q = `SELECT data FROM file_parts WHERE file_id = $1 AND part = $2`
	var data []byte
	err := r.s.rdb.QueryRowContext(r.ctx, r.s.dialect.rebind(q), r.id, r.part).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		if r.got != r.want {
			return inkwell.Errorf(inkwell.ENOTFOUND, "file %q was deleted while it was read (%d of its %d bytes read)", r.id, r.got, r.want)
		}
		r.done = true
		return nil
	}
	if err != nil {
		return r.s.classify(fmt.Errorf("read file %q, part %d: %w", r.id, r.part, err))
	}
	r.part++
	r.got += int64(len(data))
	r.cur = data
	return nil
}

// newFileID is "file-" and 24 random hex digits: never a virtual file's
// id (api's "file-batch_…"), which holds a letter past f.
func newFileID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "file-" + hex.EncodeToString(b)
}
