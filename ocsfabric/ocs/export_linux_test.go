package ocs

// SetKernelLocalDelivery makes Controllers created from now on leave the
// frames for a ToR's own servers to IP forwarding (on) or deliver them in
// the ToR program (off, the default), and returns the previous setting.
func SetKernelLocalDelivery(on bool) bool {
	old := kernelLocalDelivery
	kernelLocalDelivery = on
	return old
}
