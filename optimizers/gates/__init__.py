"""Gates: the checks a candidate passes in a chain (the local check on the blamed calls, the minibatch, the
valset), each returning a typed `Decision`."""
