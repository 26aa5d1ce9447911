package event

import (
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
)

// toCore converts an events.k8s.io/v1 Event to core v1, as
// kube-apiserver's Convert_v1_Event_To_core_Event does (regarding is
// involvedObject, note is message, the deprecated* fields are source,
// firstTimestamp, lastTimestamp and count). in is not modified and
// shares nothing with the result.
func toCore(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	if in.Related != nil {
		related := *in.Related
		out.Related = &related
	}
	return out
}

// fromCore is the converse of toCore (Convert_core_Event_To_v1_Event).
func fromCore(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	if in.Related != nil {
		related := *in.Related
		out.Related = &related
	}
	return out
}
