package main

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

func managers(obj metav1.Object) string {
	var out []string
	for _, m := range obj.GetManagedFields() {
		out = append(out, fmt.Sprintf("%s/%s", m.Manager, m.Operation))
	}
	return strings.Join(out, ",")
}

func isFieldConflict(err error) bool {
	status, ok := err.(apierrors.APIStatus)
	if !ok || !apierrors.IsConflict(err) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			return true
		}
	}
	return false
}

// checkServerSideApply: typed apply configurations create and update objects, managedFields
// record each manager's fields (client-go's Extract reads them back), a second manager's
// change to a field the first owns is a 409 with FieldManagerConflict causes unless forced, a
// field a manager stops applying is removed, and list items keyed by name merge per manager.
func checkServerSideApply(ctx context.Context, e *env) error {
	cms := e.pb.CoreV1().ConfigMaps(e.ns)
	first := corev1ac.ConfigMap("ssa", e.ns).WithLabels(map[string]string{"team": "a"}).
		WithData(map[string]string{"a": "1", "shared": "a"})
	got, err := cms.Apply(ctx, first, metav1.ApplyOptions{FieldManager: "manager-a"})
	if err != nil {
		return fmt.Errorf("first apply: %w", err)
	}
	if m := managers(got); m != "manager-a/Apply" {
		return fmt.Errorf("managedFields after the first apply: %s, want manager-a/Apply", m)
	}
	extracted, err := corev1ac.ExtractConfigMap(got, "manager-a")
	if err != nil {
		return fmt.Errorf("ExtractConfigMap: %w", err)
	}
	if !reflect.DeepEqual(extracted.Data, first.Data) || !reflect.DeepEqual(extracted.Labels, first.Labels) {
		return fmt.Errorf("ExtractConfigMap(manager-a) gives data %v labels %v, want %v %v",
			extracted.Data, extracted.Labels, first.Data, first.Labels)
	}
	second := corev1ac.ConfigMap("ssa", e.ns).WithData(map[string]string{"shared": "b", "b": "2"})
	_, err = cms.Apply(ctx, second, metav1.ApplyOptions{FieldManager: "manager-b"})
	if !isFieldConflict(err) {
		return fmt.Errorf("manager-b changing manager-a's data.shared: %v, want a 409 with FieldManagerConflict", err)
	}
	got, err = cms.Apply(ctx, second, metav1.ApplyOptions{FieldManager: "manager-b", Force: true})
	if err != nil {
		return fmt.Errorf("forced apply: %w", err)
	}
	want := map[string]string{"a": "1", "b": "2", "shared": "b"}
	if !reflect.DeepEqual(got.Data, want) {
		return fmt.Errorf("data after the forced apply: %v, want %v", got.Data, want)
	}
	if extracted, err = corev1ac.ExtractConfigMap(got, "manager-a"); err != nil {
		return fmt.Errorf("ExtractConfigMap: %w", err)
	}
	if !reflect.DeepEqual(extracted.Data, map[string]string{"a": "1"}) {
		return fmt.Errorf("manager-a owns data %v after manager-b forced data.shared, want only a", extracted.Data)
	}
	// manager-a applies without data.a: the field it alone owned goes.
	got, err = cms.Apply(ctx, corev1ac.ConfigMap("ssa", e.ns).WithLabels(map[string]string{"team": "a"}),
		metav1.ApplyOptions{FieldManager: "manager-a"})
	if err != nil {
		return fmt.Errorf("apply without data.a: %w", err)
	}
	if want := map[string]string{"b": "2", "shared": "b"}; !reflect.DeepEqual(got.Data, want) {
		return fmt.Errorf("data after manager-a dropped data.a: %v, want %v", got.Data, want)
	}
	// A Deployment: containers merge by name, each manager keeping its own.
	deploys := e.pb.AppsV1().Deployments(e.ns)
	labels := map[string]string{"app": "ssa"}
	web := appsv1ac.Deployment("ssa", e.ns).WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(2).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("web").WithImage("nginx:1")))))
	if _, err := deploys.Apply(ctx, web, metav1.ApplyOptions{FieldManager: "manager-a"}); err != nil {
		return fmt.Errorf("Deployment apply: %w", err)
	}
	sidecar := appsv1ac.Deployment("ssa", e.ns).WithSpec(appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("log").WithImage("fluent-bit:3")))))
	dep, err := deploys.Apply(ctx, sidecar, metav1.ApplyOptions{FieldManager: "manager-b"})
	if err != nil {
		return fmt.Errorf("a second manager's container: %w", err)
	}
	var names []string
	for _, c := range dep.Spec.Template.Spec.Containers {
		names = append(names, c.Name+"="+c.Image)
	}
	if strings.Join(names, ",") != "web=nginx:1,log=fluent-bit:3" {
		return fmt.Errorf("containers after two managers applied one each: %v", names)
	}
	if *dep.Spec.Replicas != 2 {
		return fmt.Errorf("replicas %d after manager-b's apply, want manager-a's 2", *dep.Spec.Replicas)
	}
	scale := appsv1ac.Deployment("ssa", e.ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(5))
	if _, err := deploys.Apply(ctx, scale, metav1.ApplyOptions{FieldManager: "manager-b"}); !isFieldConflict(err) {
		return fmt.Errorf("manager-b changing manager-a's replicas: %v, want a 409 with FieldManagerConflict", err)
	}
	// A dry run answers the applied object and stores nothing.
	probe := corev1ac.ConfigMap("ssa-dry", e.ns).WithData(map[string]string{"x": "1"})
	if _, err := cms.Apply(ctx, probe, metav1.ApplyOptions{FieldManager: "manager-a", DryRun: []string{metav1.DryRunAll}}); err != nil {
		return fmt.Errorf("dry-run apply: %w", err)
	}
	if _, err := cms.Get(ctx, "ssa-dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("after a dry-run apply, get: %v, want 404", err)
	}
	return nil
}
