// OpenGL 3.3 core entry points, declared by the system's headers and exported by GLVND's libOpenGL/libGL
// (which export every core function), so no loader is needed. Include this, never <GL/gl.h> directly, and
// before GLFW (which is told to include nothing).
#pragma once
#define GL_GLEXT_PROTOTYPES 1
#include <GL/gl.h>
#include <GL/glext.h>
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
