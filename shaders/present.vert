#version 330 core
// The frame as a quad over its rect, made from the vertex index (no vertex buffer): vertices 0..3 are the
// corners of a triangle strip. u_rect is the frame's rect in clip space: (left, bottom, right, top).
uniform vec4 u_rect;
out vec2 v_uv;

void main() {
  vec2 corner = vec2(float(gl_VertexID & 1), float(gl_VertexID >> 1));
  gl_Position = vec4(mix(u_rect.xy, u_rect.zw, corner), 0.0, 1.0);
  // Texture row 0 is the frame's top row (frames are stored top row first), so v runs top to bottom.
  v_uv = vec2(corner.x, 1.0 - corner.y);
}
