this is not a python program {
