package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// events records what an informer's handler was told, by ConfigMap name.
type events struct {
	mu      sync.Mutex
	adds    map[string]int
	updates map[string]int
	resyncs map[string]int // updates whose old and new resourceVersion are the same
	deletes map[string]int
}

func newEvents() *events {
	return &events{adds: map[string]int{}, updates: map[string]int{}, resyncs: map[string]int{},
		deletes: map[string]int{}}
}

func cmName(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		return cm.Name
	}
	return fmt.Sprintf("<%T>", obj)
}

func (ev *events) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			ev.mu.Lock()
			defer ev.mu.Unlock()
			ev.adds[cmName(obj)]++
		},
		UpdateFunc: func(oldObj, newObj any) {
			ev.mu.Lock()
			defer ev.mu.Unlock()
			name := cmName(newObj)
			if oldObj.(*corev1.ConfigMap).ResourceVersion == newObj.(*corev1.ConfigMap).ResourceVersion {
				ev.resyncs[name]++
			} else {
				ev.updates[name]++
			}
		},
		DeleteFunc: func(obj any) {
			ev.mu.Lock()
			defer ev.mu.Unlock()
			ev.deletes[cmName(obj)]++
		},
	}
}

func (ev *events) count(which func(*events) map[string]int, name string) int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return which(ev)[name]
}

func adds(ev *events) map[string]int    { return ev.adds }
func updates(ev *events) map[string]int { return ev.updates }
func resyncs(ev *events) map[string]int { return ev.resyncs }
func deletes(ev *events) map[string]int { return ev.deletes }

func (e *env) configMap(ctx context.Context, name string, labels map[string]string) error {
	_, err := e.pb.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Data:       map[string]string{"k": "v"}}, metav1.CreateOptions{})
	return err
}

// checkInformerResync: a shared informer with a resync period lists, watches, and hands every
// cached object to its handler again at each resync (an update with the same resourceVersion).
func checkInformerResync(ctx context.Context, e *env) error {
	labels := map[string]string{"check": "resync"}
	if err := e.configMap(ctx, "resync-a", labels); err != nil {
		return err
	}
	lw := cache.NewFilteredListWatchFromClient(e.pb.CoreV1().RESTClient(), "configmaps", e.ns,
		func(o *metav1.ListOptions) { o.LabelSelector = "check=resync" })
	inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, time.Second, cache.Indexers{})
	ev := newEvents()
	if _, err := inf.AddEventHandlerWithResyncPeriod(ev.handler(), time.Second); err != nil {
		return err
	}
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	go inf.RunWithContext(ictx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("the informer's cache never synced")
	}
	if err := e.configMap(ctx, "resync-b", labels); err != nil {
		return err
	}
	if err := waitFor(ctx, "the add of resync-b", func() (bool, error) {
		return ev.count(adds, "resync-b") == 1, nil
	}); err != nil {
		return err
	}
	if err := waitFor(ctx, "three resyncs of each ConfigMap", func() (bool, error) {
		return ev.count(resyncs, "resync-a") >= 3 && ev.count(resyncs, "resync-b") >= 3, nil
	}); err != nil {
		return err
	}
	if n := ev.count(adds, "resync-a"); n != 1 {
		return fmt.Errorf("resync-a was added %d times, want 1", n)
	}
	if n := ev.count(updates, "resync-a"); n != 0 {
		return fmt.Errorf("resync-a got %d updates with a new resourceVersion, want none", n)
	}
	e.logf("resyncs: resync-a %d, resync-b %d", ev.count(resyncs, "resync-a"), ev.count(resyncs, "resync-b"))
	return nil
}

// gatedWatch wraps a ListerWatcher: it counts lists (with the resourceVersion each asked for)
// and lets the test stop the open watch and hold the next one until it says so.
type gatedWatch struct {
	inner   cache.ListerWatcher
	mu      sync.Mutex
	lists   []string
	current watch.Interface
	watches atomic.Int32
	hold    chan struct{} // non-nil: the next watch waits until it is closed
}

func (g *gatedWatch) List(options metav1.ListOptions) (runtime.Object, error) {
	g.mu.Lock()
	g.lists = append(g.lists, fmt.Sprintf("%q", options.ResourceVersion))
	g.mu.Unlock()
	return g.inner.List(options)
}

func (g *gatedWatch) Watch(options metav1.ListOptions) (watch.Interface, error) {
	g.mu.Lock()
	hold := g.hold
	g.mu.Unlock()
	if hold != nil {
		<-hold
	}
	w, err := g.inner.Watch(options)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watches.Add(1)
	g.current = w
	return w, err
}

func (g *gatedWatch) listed() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.lists...)
}

// checkInformerRelist: an informer whose watch resumes from a resourceVersion the server has
// forgotten (more than --history-window changes ago) gets 410 Gone, lists again, and tells its
// handler what changed meanwhile: an add for the object created, a delete for the one removed.
func checkInformerRelist(ctx context.Context, e *env) error {
	if e.window <= 0 {
		return fmt.Errorf("needs -history-window (the server's --history-window) to outrun it")
	}
	labels := map[string]string{"check": "relist"}
	for _, name := range []string{"relist-a", "relist-b"} {
		if err := e.configMap(ctx, name, labels); err != nil {
			return err
		}
	}
	if err := e.configMap(ctx, "relist-churn", nil); err != nil {
		return err
	}
	gw := &gatedWatch{inner: cache.NewFilteredListWatchFromClient(e.pb.CoreV1().RESTClient(),
		"configmaps", e.ns, func(o *metav1.ListOptions) { o.LabelSelector = "check=relist" })}
	inf := cache.NewSharedIndexInformer(gw, &corev1.ConfigMap{}, 0, cache.Indexers{})
	ev := newEvents()
	if _, err := inf.AddEventHandler(ev.handler()); err != nil {
		return err
	}
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	go inf.RunWithContext(ictx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("the informer's cache never synced")
	}
	if err := waitFor(ctx, "the first watch", func() (bool, error) { return gw.watches.Load() == 1, nil }); err != nil {
		return err
	}
	// An update the open watch delivers, so the informer's last resourceVersion is known.
	if _, err := e.pb.CoreV1().ConfigMaps(e.ns).Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "relist-a", Labels: labels},
		Data:       map[string]string{"k": "v2"}}, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if err := waitFor(ctx, "the update of relist-a", func() (bool, error) {
		return ev.count(updates, "relist-a") == 1, nil
	}); err != nil {
		return err
	}
	// The reflector calls a watch that closes within a second without events "very short"
	// and backs off; keep it open over a second so the next watch follows at once.
	time.Sleep(1100 * time.Millisecond)
	hold := make(chan struct{})
	gw.mu.Lock()
	gw.hold = hold
	current := gw.current
	gw.mu.Unlock()
	current.Stop() // the reflector watches again from its last resourceVersion: held here
	if err := e.configMap(ctx, "relist-c", labels); err != nil {
		return err
	}
	if err := e.pb.CoreV1().ConfigMaps(e.ns).Delete(ctx, "relist-b", metav1.DeleteOptions{}); err != nil {
		return err
	}
	for i := 0; i <= e.window; i++ {
		if _, err := e.pb.CoreV1().ConfigMaps(e.ns).Update(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "relist-churn"},
			Data:       map[string]string{"i": fmt.Sprint(i)}}, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	listsBefore := len(gw.listed())
	gw.mu.Lock()
	gw.hold = nil
	gw.mu.Unlock()
	close(hold)
	if err := waitFor(ctx, "the add of relist-c and the delete of relist-b after the relist", func() (bool, error) {
		return ev.count(adds, "relist-c") == 1 && ev.count(deletes, "relist-b") == 1, nil
	}); err != nil {
		return fmt.Errorf("%w (lists: %s; watches: %d)", err, strings.Join(gw.listed(), ", "),
			gw.watches.Load())
	}
	lists := gw.listed()
	if len(lists) <= listsBefore {
		return fmt.Errorf("the informer saw the changes without listing again (lists: %s)",
			strings.Join(lists, ", "))
	}
	keys := inf.GetStore().ListKeys()
	sort.Strings(keys)
	want := e.ns + "/relist-a," + e.ns + "/relist-c"
	if strings.Join(keys, ",") != want {
		return fmt.Errorf("the informer's store holds %v after the relist, want %s", keys, want)
	}
	e.logf("lists with resourceVersion %s; %d watches", strings.Join(lists, ", "), gw.watches.Load())
	return nil
}
