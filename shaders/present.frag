#version 330 core
// The frame's texel, opaque; nearest or linear scaling is the texture's filter, set per draw.
uniform sampler2D u_frame;
in vec2 v_uv;
out vec4 color;

void main() { color = vec4(texture(u_frame, v_uv).rgb, 1.0); }
