package testkit

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Intruder is another process on the machine trying a tap without its
// secret, for tests to run as a child process:
//
//	intruder PROXY-HOST:PORT UPSTREAM-URL [ROUTE-URL...]
//
// It requests UPSTREAM-URL through the forward proxy at PROXY-HOST:PORT,
// plainly and by CONNECT, each without credentials and with wrong ones,
// then GETs each ROUTE-URL directly, and prints one line per try to
// stdout: its name, the status and the Proxy-Authenticate header, or for
// a route the body:
//
//	plain 407 Basic realm="acptap"
//	route-1 404 acptap: not found
//
// It returns 0 when every try got an answer, whatever the answer.
func Intruder(args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 {
		fmt.Fprintln(stderr, "usage: intruder PROXY-HOST:PORT UPSTREAM-URL [ROUTE-URL...]")
		return 2
	}
	proxyAddr, upstream := args[0], args[1]
	up, err := url.Parse(upstream)
	if err != nil {
		fmt.Fprintln(stderr, "intruder:", err)
		return 2
	}
	wrong := BasicAuth("acptap", strings.Repeat("A", 32))
	tries := []struct{ name, method, target, auth string }{
		{"plain", http.MethodGet, upstream, ""},
		{"plain-wrong", http.MethodGet, upstream, wrong},
		{"connect", http.MethodConnect, up.Host, ""},
		{"connect-wrong", http.MethodConnect, up.Host, wrong},
	}
	for _, tr := range tries {
		resp, err := ProxyRequest(proxyAddr, tr.method, tr.target, tr.auth)
		if err != nil {
			fmt.Fprintf(stderr, "intruder: %s: %v\n", tr.name, err)
			return 1
		}
		resp.Body.Close()
		fmt.Fprintf(stdout, "%s %d %s\n", tr.name, resp.StatusCode, resp.Header.Get("Proxy-Authenticate"))
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: time.Minute}
	for i, u := range args[2:] {
		resp, err := client.Get(u)
		if err != nil {
			fmt.Fprintf(stderr, "intruder: route %d: %v\n", i+1, err)
			return 1
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(stdout, "route-%d %d %s\n", i+1, resp.StatusCode, bytes.TrimSpace(body))
	}
	return 0
}

// IntruderWant is what Intruder prints when the tap refuses it
// everything, with routes ROUTE-URLs.
func IntruderWant(routes int) string {
	want := ""
	for _, name := range []string{"plain", "plain-wrong", "connect", "connect-wrong"} {
		want += name + ` 407 Basic realm="acptap"` + "\n"
	}
	for i := 1; i <= routes; i++ {
		want += fmt.Sprintf("route-%d 404 acptap: not found\n", i)
	}
	return want
}

// ProxyRequest sends one request to the forward proxy at addr on a fresh
// connection, CONNECT target or method with the absolute URI target, with
// Proxy-Authorization auth unless empty, and reads the response's header.
// The body is the caller's to close.
func ProxyRequest(addr, method, target, auth string) (*http.Response, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Minute)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(time.Minute))
	host := target
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		host = u.Host
	}
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, host)
	if auth != "" {
		fmt.Fprintf(conn, "Proxy-Authorization: %s\r\n", auth)
	}
	io.WriteString(conn, "\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		conn.Close()
		return nil, err
	}
	resp.Body = closeBoth{resp.Body, conn}
	return resp, nil
}

// closeBoth closes a response body and its connection.
type closeBoth struct {
	io.ReadCloser
	conn net.Conn
}

func (c closeBoth) Close() error {
	c.ReadCloser.Close()
	return c.conn.Close()
}

// BasicAuth returns the value of a Basic Authorization or
// Proxy-Authorization header.
func BasicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}
