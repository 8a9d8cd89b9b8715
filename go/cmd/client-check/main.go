// Command client-check runs what Go controllers rely on from an API server against the one
// its kubeconfig names (written for `emu serve`): informers with resync and a relist after
// 410 Gone, leader election on a Lease, server-side apply with typed apply configurations,
// protobuf request bodies, and watch bookmarks. It prints one line per check and exits 1 when
// any check fails, 2 on bad flags or an unreachable server.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	protobuf = "application/vnd.kubernetes.protobuf"
	jsonType = "application/json"
)

// env is what every check gets: two clientsets on the same server (one sending protobuf
// bodies as client-go's generated clients and controller-runtime do for built-in kinds, one
// sending JSON), the namespace made for this run, and the server's history window.
type env struct {
	pb     kubernetes.Interface
	json   kubernetes.Interface
	ns     string
	window int
	logf   func(format string, args ...any)
}

type check struct {
	name string
	fn   func(ctx context.Context, e *env) error
}

var checks = []check{
	{"informer-resync", checkInformerResync},
	{"informer-relist-410", checkInformerRelist},
	{"leader-election", checkLeaderElection},
	{"server-side-apply", checkServerSideApply},
	{"protobuf-bodies", checkProtobuf},
	{"watch-bookmarks", checkBookmarks},
}

func main() {
	os.Exit(run())
}

func run() int {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the server to check")
	window := flag.Int("history-window", 0, "the server's history window (emu serve --history-window), "+
		"which the 410 check outruns; it fails without it")
	only := flag.String("only", "", "comma-separated check names to run (default: all)")
	timeout := flag.Duration("timeout", 60*time.Second, "time limit of each check")
	verbose := flag.Bool("v", false, "say what each check does")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "client-check: no kubeconfig: pass -kubeconfig or set KUBECONFIG")
		return 2
	}
	selected := map[string]bool{}
	if *only != "" {
		known := map[string]bool{}
		for _, c := range checks {
			known[c.name] = true
		}
		for _, name := range strings.Split(*only, ",") {
			if !known[name] {
				fmt.Fprintf(os.Stderr, "client-check: no check named %q (known: %s)\n", name, names())
				return 2
			}
			selected[name] = true
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "client-check: cannot load kubeconfig %s: %v\n", *kubeconfig, err)
		return 2
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	e := &env{window: *window, logf: func(string, ...any) {}}
	if *verbose {
		e.logf = func(format string, args ...any) { fmt.Printf("       "+format+"\n", args...) }
	}
	pbCfg := rest.CopyConfig(cfg)
	pbCfg.ContentType = protobuf
	pbCfg.AcceptContentTypes = protobuf + "," + jsonType
	pbCfg.UserAgent = "client-check/protobuf"
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType = jsonType
	jsonCfg.AcceptContentTypes = jsonType
	jsonCfg.UserAgent = "client-check/json"
	if e.pb, err = kubernetes.NewForConfig(pbCfg); err != nil {
		fmt.Fprintf(os.Stderr, "client-check: %v\n", err)
		return 2
	}
	if e.json, err = kubernetes.NewForConfig(jsonCfg); err != nil {
		fmt.Fprintf(os.Stderr, "client-check: %v\n", err)
		return 2
	}
	ctx := context.Background()
	setup, cancel := context.WithTimeout(ctx, 30*time.Second)
	ns, err := e.json.CoreV1().Namespaces().Create(setup, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "client-check-"}}, metav1.CreateOptions{})
	if err == nil {
		// the ServiceAccount the protobuf check's Pod runs as: kube-apiserver's ServiceAccount
		// admission refuses a Pod whose ServiceAccount does not exist
		_, err = e.json.CoreV1().ServiceAccounts(ns.Name).Create(setup, &corev1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: "ray"}}, metav1.CreateOptions{})
	}
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "client-check: cannot create a namespace on %s: %v\n", cfg.Host, err)
		return 2
	}
	e.ns = ns.Name
	failed := 0
	ran := 0
	for _, c := range checks {
		if len(selected) > 0 && !selected[c.name] {
			continue
		}
		ran++
		cctx, cancel := context.WithTimeout(ctx, *timeout)
		began := time.Now()
		err := c.fn(cctx, e)
		cancel()
		took := time.Since(began).Round(10 * time.Millisecond)
		if err != nil {
			failed++
			fmt.Printf("FAIL %s (%s): %v\n", c.name, took, err)
		} else {
			fmt.Printf("ok   %s (%s)\n", c.name, took)
		}
	}
	fmt.Printf("%d checks, %d failed\n", ran, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

func names() string {
	out := make([]string, 0, len(checks))
	for _, c := range checks {
		out = append(out, c.name)
	}
	return strings.Join(out, ", ")
}

// waitFor polls cond every 20 ms until it holds, the context ends (an error naming what was
// awaited) or cond fails.
func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
