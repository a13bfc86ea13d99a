package firefox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"golang.org/x/net/websocket"
)

// conn is a WebDriver BiDi connection: commands with ids, answered by
// messages carrying the same id (W3C WebDriver BiDi, "Transport").
type conn struct {
	ws *websocket.Conn

	mu      sync.Mutex
	next    int
	waiting map[int]chan message
	err     error // set once the connection is gone
	done    chan struct{}
}

// message is one message from the browser: a command's success or error,
// or an event (not used here).
type message struct {
	Type    string          `json:"type"` // success, error or event
	ID      *int            `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
	Method  string          `json:"method"`
}

// Error is an error the browser answered a command with.
type Error struct {
	Method  string
	Code    string // the WebDriver error code, such as "no such element"
	Message string
}

func (e *Error) Error() string { return e.Method + ": " + e.Code + ": " + e.Message }

// errClosed is returned for commands sent after the connection ended.
var errClosed = errors.New("firefox: the WebDriver BiDi connection is closed")

// dial connects to the BiDi endpoint ws://host:port/session. The remote
// agent refuses connections whose Origin it was not told to allow; Firefox
// is started with --remote-allow-origins origin.
func dial(ctx context.Context, wsURL, origin string) (*conn, error) {
	cfg, err := websocket.NewConfig(wsURL, origin)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(wsURL)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", wsURL, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl) // for the handshake
	}
	ws, err := websocket.NewClient(cfg, nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("websocket handshake with %s: %w", wsURL, err)
	}
	_ = nc.SetDeadline(time.Time{})
	ws.MaxPayloadBytes = 64 << 20 // a full-page screenshot, base64
	c := &conn{ws: ws, waiting: map[int]chan message{}, done: make(chan struct{})}
	go c.read()
	return c, nil
}

// read dispatches the browser's answers to the commands waiting for them
// until the connection ends.
func (c *conn) read() {
	var err error
	for {
		var b []byte
		if err = websocket.Message.Receive(c.ws, &b); err != nil {
			break
		}
		var m message
		if err = json.Unmarshal(b, &m); err != nil {
			err = fmt.Errorf("a message from the browser: %w", err)
			break
		}
		if m.ID == nil { // an event, or an error about no command
			continue
		}
		c.mu.Lock()
		ch := c.waiting[*m.ID]
		delete(c.waiting, *m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.done)
}

// call sends method with params and decodes the result into out (when not
// nil). It returns when the answer comes, the connection ends or ctx is
// done.
func (c *conn) call(ctx context.Context, method string, params, out any) error {
	if params == nil {
		params = struct{}{}
	}
	ch := make(chan message, 1)
	c.mu.Lock()
	if c.err != nil || isClosed(c.done) {
		c.mu.Unlock()
		return errClosed
	}
	c.next++
	id := c.next
	c.waiting[id] = ch
	c.mu.Unlock()
	cmd, err := json.Marshal(struct {
		ID     int    `json:"id"`
		Method string `json:"method"`
		Params any    `json:"params"`
	}{id, method, params})
	if err != nil {
		return err
	}
	if err := websocket.Message.Send(c.ws, string(cmd)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Type == "error" {
			return &Error{Method: method, Code: m.Error, Message: m.Message}
		}
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(m.Result, out); err != nil {
			return fmt.Errorf("%s: result: %w", method, err)
		}
		return nil
	case <-c.done:
		return fmt.Errorf("%s: %w", method, errClosed)
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.waiting, id)
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

func (c *conn) close() error { return c.ws.Close() }

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
