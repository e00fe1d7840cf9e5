#version 450
// Does nothing: measures what a dispatch costs by itself.
layout(local_size_x = 64) in;
void main() {}
