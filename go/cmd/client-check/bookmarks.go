package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func next(ctx context.Context, w watch.Interface) (watch.Event, error) {
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			return ev, fmt.Errorf("the watch closed")
		}
		return ev, nil
	case <-ctx.Done():
		return watch.Event{}, fmt.Errorf("no event before the time limit")
	}
}

// checkBookmarks: a watch that allows bookmarks gets BOOKMARK events carrying only a
// resourceVersion while nothing changes (kube-apiserver sends about one a minute: run the
// server fast, emu serve --speed 30, to see one in two seconds), and a new watch from that
// resourceVersion replays nothing; a watch-list (sendInitialEvents) sends the current objects
// and then the bookmark annotated k8s.io/initial-events-end.
func checkBookmarks(ctx context.Context, e *env) error {
	cms := e.pb.CoreV1().ConfigMaps(e.ns)
	for _, name := range []string{"bm-a", "bm-b"} {
		if err := e.configMap(ctx, name, map[string]string{"check": "bookmark"}); err != nil {
			return err
		}
	}
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "check=bookmark"})
	if err != nil {
		return err
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "check=bookmark",
		ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	// Changes elsewhere move the server's resourceVersion past the list's.
	if err := e.configMap(ctx, "bm-other", nil); err != nil {
		w.Stop()
		return err
	}
	ev, err := next(ctx, w)
	w.Stop()
	if err != nil {
		return fmt.Errorf("waiting for a bookmark: %w", err)
	}
	if ev.Type != watch.Bookmark {
		return fmt.Errorf("first event of a quiet watch: %s, want BOOKMARK", ev.Type)
	}
	mark, ok := ev.Object.(*corev1.ConfigMap)
	if !ok || mark.ResourceVersion == "" || mark.Name != "" {
		return fmt.Errorf("the bookmark's object: %#v, want a ConfigMap with only a resourceVersion", ev.Object)
	}
	e.logf("bookmark at resourceVersion %s (list was at %s)", mark.ResourceVersion, list.ResourceVersion)
	// Resuming from the bookmark: the next event is the next change, nothing replayed.
	w, err = cms.Watch(ctx, metav1.ListOptions{LabelSelector: "check=bookmark",
		ResourceVersion: mark.ResourceVersion})
	if err != nil {
		return err
	}
	if err := e.configMap(ctx, "bm-c", map[string]string{"check": "bookmark"}); err != nil {
		w.Stop()
		return err
	}
	ev, err = next(ctx, w)
	w.Stop()
	if err != nil {
		return fmt.Errorf("watching from the bookmark: %w", err)
	}
	if got, ok := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Added || !ok || got.Name != "bm-c" {
		return fmt.Errorf("first event from the bookmark's resourceVersion: %s %v, want ADDED bm-c", ev.Type, ev.Object)
	}
	// Watch-list: the current objects, then the bookmark that ends them.
	w, err = cms.Watch(ctx, metav1.ListOptions{LabelSelector: "check=bookmark", AllowWatchBookmarks: true,
		SendInitialEvents: ptr(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		return fmt.Errorf("watch-list: %w", err)
	}
	defer w.Stop()
	var added []string
	for {
		ev, err := next(ctx, w)
		if err != nil {
			return fmt.Errorf("watch-list after %v: %w", added, err)
		}
		obj, ok := ev.Object.(*corev1.ConfigMap)
		if !ok {
			return fmt.Errorf("watch-list event %s carries %T", ev.Type, ev.Object)
		}
		if ev.Type == watch.Bookmark {
			if obj.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				return fmt.Errorf("the bookmark after %v lacks the %s annotation", added, metav1.InitialEventsAnnotationKey)
			}
			break
		}
		if ev.Type != watch.Added {
			return fmt.Errorf("watch-list initial event %s, want ADDED", ev.Type)
		}
		added = append(added, obj.Name)
	}
	if fmt.Sprint(added) != "[bm-a bm-b bm-c]" {
		return fmt.Errorf("watch-list sent %v before its bookmark, want [bm-a bm-b bm-c]", added)
	}
	return nil
}
