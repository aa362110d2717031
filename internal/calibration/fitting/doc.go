// Package fitting is the calibration lab: it measures how well the
// distributions a model gives match how often it is right (Measure,
// Stats), fits calibrators and prediction sets per question kind and
// option-count bucket (FitTemperature, FitMethod, FitConformal), chooses
// among them by cross-validation (Select), suggests gates (SuggestGate,
// MassStats.SuggestMassGate), and compares answers over time and between models
// (MeasureDriftOf, Compare). What it fits is written to a fits file of
// package calibration, which the request path reads; nothing on the
// request path imports this package. It is pure: no I/O, no global state.
package fitting
