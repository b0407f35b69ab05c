package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/inkwell/inkwell"
)

// Holder naming (PostgreSQL): a lock session names its holder in its
// application_name, and a refused process reads it back from pg_locks and
// pg_stat_activity to say who holds the lane.

// holderAppName is the lock session's application_name, which is how a
// refused process learns who holds the lane: role, pid, incarnation and
// host, cut to PostgreSQL's 63 bytes (the host goes last, so only it is cut).
func holderAppName(role string, h Holder) string {
	name := fmt.Sprintf("inkwell/%s/%d/%s/%s", role, h.PID, h.Incarnation, h.Host)
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// pgHolder is what the server says about the session holding a lane.
type pgHolder struct {
	role       string // "lane", "rescue", or "" for a session that is not Inkwell's
	holder     Holder
	backendPID int
	appName    string
	clientAddr string
	known      bool // a session holds it (false: it went away while we looked)
	// otherLane is the lane the holder runs when that is not the lane
	// asked for: the two names' keys collide (laneLockKey is 32 bits).
	otherLane string
}

// lockHolder reads the holder of lane's lock from pg_locks and
// pg_stat_activity, and fills in what the lanes row knows.
func (s *Store) lockHolder(ctx context.Context, conn *sql.Conn, lane string) (pgHolder, error) {
	const q = `SELECT a.pid, COALESCE(a.application_name, ''), COALESCE(host(a.client_addr), 'local socket'), a.backend_start
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND l.classid = ($1::int8 & 4294967295)::oid
		  AND l.objid = ($2::int8 & 4294967295)::oid
		LIMIT 1`
	var h pgHolder
	var since time.Time
	err := conn.QueryRowContext(ctx, q, laneLockNS, laneLockKey(lane)).Scan(&h.backendPID, &h.appName, &h.clientAddr, &since)
	if errors.Is(err, sql.ErrNoRows) {
		return h, nil
	}
	if err != nil {
		return h, s.classify(fmt.Errorf("lane %s: read lock holder: %w", lane, err))
	}
	h.known = true
	h.holder.Since = since.UTC()
	h.parseAppName()
	if h.role == "lane" {
		// The lanes row of the holder's incarnation, once it has registered:
		// its host in full (the application name may have cut it), and the
		// lane it runs, which may be another lane whose key is the same.
		row, err := scanLane(conn.QueryRowContext(ctx, `SELECT `+laneColumns+` FROM lanes WHERE incarnation = $1`, h.holder.Incarnation))
		if err == nil {
			h.holder.Host = row.Host
			if row.Name != lane && laneLockKey(row.Name) == laneLockKey(lane) {
				h.otherLane = row.Name
			}
		}
	}
	return h, nil
}

func (h *pgHolder) parseAppName() {
	parts := strings.SplitN(h.appName, "/", 5)
	if len(parts) != 5 || parts[0] != "inkwell" {
		return
	}
	pid, err := strconv.Atoi(parts[2])
	if err != nil {
		return
	}
	h.role = parts[1]
	h.holder.PID, h.holder.Incarnation, h.holder.Host = pid, parts[3], parts[4]
}

func (h pgHolder) refusal(lane string) error {
	var who string
	switch {
	case !h.known:
		who = "a session that ended while we looked; try again"
	case h.role == "":
		who = fmt.Sprintf("a session that is not an Inkwell lane (application_name %q, backend pid %d, client %s, since %s)",
			h.appName, h.backendPID, h.clientAddr, h.holder.Since.Format(time.RFC3339))
	default:
		who = fmt.Sprintf("%s (%s session: backend pid %d, client %s)", h.holder, h.role, h.backendPID, h.clientAddr)
	}
	if h.otherLane != "" {
		return inkwell.Errorf(inkwell.ELANEHELD, "lane %s cannot take its lock pg_advisory_lock(%d, %d): lane %s has the same lock, "+
			"because the two names hash to one key, and %s holds it for lane %s. Rename one of the two lanes",
			lane, laneLockNS, laneLockKey(lane), h.otherLane, who, h.otherLane)
	}
	return inkwell.Errorf(inkwell.ELANEHELD, "lane %s is held by %s; lock pg_advisory_lock(%d, %d). "+
		"Refusing to start the lane or recover its rows while its holder is alive", lane, who, laneLockNS, laneLockKey(lane))
}
